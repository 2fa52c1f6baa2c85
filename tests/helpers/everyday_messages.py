"""Everyday user messages that are not corrections (new requests, small talk, idioms with "too"/"next time"):
the shared negative controls of the PRM rules (must stay neutral) and the hint rules (must give no hint)."""

NOT_CORRECTIONS = [
    "ok",
    "hm ok",
    "ok, next time then",
    "btw what's a good name for a cat?",
    "is it going to rain today?",
    "can you help me with my homework? A train travels 120 km in 1.5 hours. What is its average speed?",
    "quick question: how do I reverse a list in python?",
    "help me with this: solve 3x + 5 = 20",
    "Please write grading comments for my student. Problem: 7 x 8 = ? Student answer: 54. Correct answer: 56.",
    "me too",
    "that's too bad",
    "is it too late to plant tomatoes?",
    "I'm too tired to cook, give me a quick recipe",
    "my sister is too shy to speak in class, any tips?",
    "it's pretty cold today, what should I wear?",
    "next time I'm in Paris I'll visit",
    "no problem, no worries",
    "looks like AI is taking over lol",
]
