"""GUI RL: desktops, apps and tasks."""
