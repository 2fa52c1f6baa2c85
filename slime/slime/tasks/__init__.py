"""Small verifiable tasks shipped with the framework, used to prove that RL actually learns.

`slime.tasks.digits`: "Repeat this digit: 7" -> "7", with an exact-match reward plugin
(`--custom-rm-path slime.tasks.digits.reward`) and a warm-started tiny policy that answers a random digit.
"""
