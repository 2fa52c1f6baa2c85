"""Notes: a small Tk text editor (the desktop's opener for .txt and .md files).

    python notes.py FILE

The window's title is ``Notes - <file name>``; the text area holds the file (created empty when missing); Ctrl+S or
the Save button writes it back, and the status line says ``Saved``. Ctrl+Q or Quit closes the window (without
saving)."""

import sys
import tkinter as tk
from pathlib import Path


def main(path: str) -> None:
    file = Path(path).expanduser()
    root = tk.Tk(className="notes")
    root.title(f"Notes - {file.name}")
    root.geometry("+0+0")
    # legible to OCR: Tk's small default font on grey, right at the screen's edge, is not read at all
    root.option_add("*Font", ("DejaVu Sans", 13))
    root.option_add("*Background", "white")
    root.option_add("*highlightBackground", "white")
    # a button under the pointer keeps its text black: Tk's default is pale on grey, which OCR does not read (files.py)
    root.option_add("*activeForeground", "black")
    root.configure(background="white", padx=8, pady=8)
    bar = tk.Frame(root)
    bar.pack(side="top", fill="x", pady=(0, 8))
    status = tk.StringVar(value="")
    text = tk.Text(root, width=80, height=24, undo=True, font=("DejaVu Sans Mono", 12))
    text.insert("1.0", file.read_text() if file.exists() else "")
    text.edit_modified(False)

    def save(_event=None):
        content = text.get("1.0", "end-1c")
        file.write_text(content + ("\n" if content and not content.endswith("\n") else ""))
        status.set("Saved")
        return "break"

    def quit_(_event=None):
        root.destroy()

    tk.Button(bar, text="Save", width=6, command=save).pack(side="left", padx=(0, 8))
    tk.Button(bar, text="Quit", width=6, command=quit_).pack(side="left")
    tk.Label(bar, textvariable=status).pack(side="left", padx=12)
    text.pack(side="top", fill="both", expand=True)
    text.bind("<Key>", lambda e: status.set(""), add="+")
    root.bind("<Control-s>", save)
    root.bind("<Control-q>", quit_)
    text.focus_set()
    root.mainloop()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "~/notes.txt")
