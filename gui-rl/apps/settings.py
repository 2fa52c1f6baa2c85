"""Settings: a small Tk settings dialog of a made-up editor ("Demo").

    python settings.py [FILE]        # default ~/.config/demo/settings.json

The window's title is ``Demo Settings``. It shows the settings in FILE (defaults for keys the file lacks) as a
display name entry, a language dropdown, theme radio buttons (Light, Dark, System; drawn as toggle buttons), check boxes (notifications,
sounds, backup copies, line numbers, word wrap), a font dropdown, a font size spinbox (8 to 32) and a volume scale
(0 to 100, steps of 10). Save (or Ctrl+S) writes every setting to FILE as JSON and the status line says ``Saved``;
a font size outside 8-32 is refused with a message and nothing is written. Cancel (or Escape) closes the window
without writing. Ctrl+A selects all the text of an entry."""

import json
import sys
import tkinter as tk
from pathlib import Path

LANGUAGES = ["English", "German", "French", "Spanish", "Italian"]
FONTS = ["DejaVu Sans", "DejaVu Serif", "DejaVu Sans Mono"]
THEMES = [("Light", "light"), ("Dark", "dark"), ("System", "system")]
CHECKS = [("notifications", "Enable notifications"), ("sounds", "Play sounds"), ("backups", "Create backup copies"),
          ("line_numbers", "Show line numbers"), ("word_wrap", "Wrap long lines")]
DEFAULTS = {"display_name": "", "language": "English", "theme": "light", "notifications": True, "sounds": False,
            "backups": False, "line_numbers": True, "word_wrap": False, "font": "DejaVu Sans Mono", "font_size": 12,
            "volume": 50}
FONT_SIZE_RANGE = (8, 32)
UI_FONT = ("DejaVu Sans", 13)  # at 12 points tesseract misreads some capitals (a "D" after a border)


def load(file: Path) -> dict:
    settings = dict(DEFAULTS)
    try:
        data = json.loads(file.read_text())
        if isinstance(data, dict):
            settings.update({k: v for k, v in data.items() if k in DEFAULTS})
    except (OSError, ValueError):
        pass
    return settings


def main(path: str) -> None:
    file = Path(path).expanduser()
    current = load(file)
    root = tk.Tk(className="settings")
    root.title("Demo Settings")
    root.geometry("+0+0")
    root.option_add("*Font", UI_FONT)
    root.option_add("*Background", "white")  # plain white: easier to read (for people and OCR)
    root.option_add("*highlightBackground", "white")
    # a button under the pointer keeps its text black: Tk's default is pale on grey, which OCR does not read (files.py)
    root.option_add("*activeForeground", "black")
    root.configure(padx=16, pady=12, background="white")
    for cls in ("Entry", "Spinbox"):
        root.bind_class(cls, "<Control-a>", lambda e: (e.widget.selection_range(0, "end"), e.widget.icursor("end"),
                                                       "break")[-1])

    name = tk.StringVar(value=str(current["display_name"]))
    language = tk.StringVar(value=current["language"] if current["language"] in LANGUAGES else LANGUAGES[0])
    theme = tk.StringVar(value=current["theme"])
    checks = {key: tk.BooleanVar(value=bool(current[key])) for key, _ in CHECKS}
    font = tk.StringVar(value=current["font"] if current["font"] in FONTS else FONTS[0])
    font_size = tk.StringVar(value=str(current["font_size"]))
    volume = tk.IntVar(value=int(current["volume"]))
    status = tk.StringVar(value="")

    row = 0

    def section(title: str) -> None:
        nonlocal row
        tk.Label(root, text=title, font=("DejaVu Sans", 15)).grid(row=row, column=0, columnspan=4, sticky="w",
                                                                          pady=(10, 2))
        row += 1

    section("General")
    tk.Label(root, text="Display name").grid(row=row, column=0, sticky="w", padx=(12, 16))
    # flat and filled, no border line: tesseract read the sunken border beside the text as part of it ("name_|Chen"
    # for the label and the name) and dropped the first name on 4 of 20 screens; 0 of 60 this way
    tk.Entry(root, textvariable=name, width=24, relief="flat", borderwidth=6, highlightthickness=0,
             background="#ececec").grid(row=row, column=1, columnspan=3, sticky="w", pady=3)
    row += 1
    tk.Label(root, text="Language").grid(row=row, column=0, sticky="w", padx=(12, 16))
    menu = tk.OptionMenu(root, language, *LANGUAGES)
    menu.configure(width=12, anchor="w")
    menu["menu"].configure(font=UI_FONT)
    menu.grid(row=row, column=1, columnspan=3, sticky="w", pady=3)
    row += 1
    tk.Label(root, text="Theme").grid(row=row, column=0, sticky="w", padx=(12, 16))
    for i, (label, value) in enumerate(THEMES):  # radio buttons drawn as a row of toggle buttons
        tk.Radiobutton(root, text=label, value=value, variable=theme, indicatoron=False, width=7, pady=3,
                       selectcolor="#c8dcff").grid(row=row, column=1 + i, sticky="w", padx=(0, 6), pady=3)
    row += 1

    section("Notifications")
    for key, label in CHECKS[:2]:
        tk.Checkbutton(root, text=label, variable=checks[key]).grid(row=row, column=0, columnspan=4, sticky="w",
                                                                    padx=(12, 0))
        row += 1
    tk.Label(root, text="Volume").grid(row=row, column=0, sticky="w", padx=(12, 16))
    tk.Scale(root, variable=volume, from_=0, to=100, resolution=10, orient="horizontal", length=220,
             showvalue=False).grid(row=row, column=1, columnspan=2, sticky="w")
    tk.Label(root, textvariable=volume).grid(row=row, column=3, sticky="w")
    row += 1

    section("Editor")
    for key, label in CHECKS[2:]:
        tk.Checkbutton(root, text=label, variable=checks[key]).grid(row=row, column=0, columnspan=4, sticky="w",
                                                                    padx=(12, 0))
        row += 1
    tk.Label(root, text="Font").grid(row=row, column=0, sticky="w", padx=(12, 16))
    fmenu = tk.OptionMenu(root, font, *FONTS)
    fmenu.configure(width=16, anchor="w")
    fmenu["menu"].configure(font=UI_FONT)
    fmenu.grid(row=row, column=1, columnspan=3, sticky="w", pady=3)
    row += 1
    tk.Label(root, text="Font size").grid(row=row, column=0, sticky="w", padx=(12, 16))
    tk.Spinbox(root, textvariable=font_size, from_=FONT_SIZE_RANGE[0], to=FONT_SIZE_RANGE[1], increment=1,
               width=6).grid(row=row, column=1, sticky="w", pady=3)
    font_size.set(str(current["font_size"]))  # the spinbox resets its variable to `from_` when created
    row += 1

    def save(_event=None):
        try:
            size = int(font_size.get().strip())
        except ValueError:
            size = None
        if size is None or not FONT_SIZE_RANGE[0] <= size <= FONT_SIZE_RANGE[1]:
            status.set(f"Font size must be a number from {FONT_SIZE_RANGE[0]} to {FONT_SIZE_RANGE[1]}")
            return "break"
        data = {"display_name": name.get(), "language": language.get(), "theme": theme.get(),
                **{k: v.get() for k, v in checks.items()}, "font": font.get(), "font_size": size,
                "volume": volume.get()}
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(json.dumps(data, indent=2) + "\n")
        status.set("Saved")
        return "break"

    def cancel(_event=None):
        root.destroy()

    buttons = tk.Frame(root)
    buttons.grid(row=row, column=0, columnspan=4, sticky="w", pady=(14, 4))
    tk.Button(buttons, text="Save", width=8, command=save).pack(side="left", padx=(0, 12))
    tk.Button(buttons, text="Cancel", width=8, command=cancel).pack(side="left")
    tk.Label(buttons, textvariable=status).pack(side="left", padx=16)
    for var in [name, language, theme, font, font_size, volume, *checks.values()]:
        var.trace_add("write", lambda *_: status.set(""))
    root.bind("<Control-s>", save)
    root.bind("<Escape>", cancel)
    root.mainloop()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "~/.config/demo/settings.json")
