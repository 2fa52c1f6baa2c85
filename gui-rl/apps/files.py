"""Files: a small Tk file manager for one folder at a time, acting on the real files.

    python files.py [FOLDER]        # default ~

The window's title is ``Files - <folder name>``; the location line shows the folder's path. The list holds the
folder's entries, folders first and marked with a trailing ``/``. Select an entry (click it, or the arrow keys),
then:

* Open (Enter, or a double click): go into the selected folder; Up (BackSpace): go to the parent folder;
* New Folder (Ctrl+N): asks for a name in the bar at the bottom, then creates the folder;
* Rename (F2): asks for the new name (the old one is filled in), then renames the entry;
* Move (Ctrl+M): asks for a folder (a name in this folder, ``..`` for the parent, or a path), then moves the entry
  into it;
* Delete (the Delete key): asks to confirm (OK or Enter), then deletes the entry (a folder with all it holds).

In the bottom bar, OK or Enter confirms and Cancel or Escape drops the question; the status line says what was done
or what went wrong (a name already taken, no such folder). Ctrl+A selects all the text of the entry."""

import shutil
import sys
import tkinter as tk
from pathlib import Path

UI_FONT = ("DejaVu Sans", 13)  # at 12 points tesseract misreads some capitals


class Files:
    def __init__(self, root: tk.Tk, folder: Path):
        self.root, self.folder = root, folder
        self.pending = None  # (action, entry path) while the bottom bar asks
        self.location = tk.StringVar()
        self.status = tk.StringVar()
        self.prompt = tk.StringVar()
        self.answer = tk.StringVar()

        top = tk.Frame(root)
        top.pack(side="top", fill="x", pady=(0, 8))
        tk.Label(top, text="Location:").pack(side="left")
        tk.Label(top, textvariable=self.location).pack(side="left", padx=8)

        middle = tk.Frame(root)
        middle.pack(side="top", fill="both", expand=True)
        frame = tk.Frame(middle, highlightthickness=1, highlightbackground="#888888", highlightcolor="#888888")
        frame.pack(side="left", fill="both", expand=True)
        # a wide inner border: text right against a frame line is misread by OCR
        self.listbox = tk.Listbox(frame, width=36, height=14, activestyle="none", exportselection=False,
                                  selectbackground="#c8dcff", selectforeground="black", highlightthickness=0,
                                  borderwidth=8, relief="flat")
        self.listbox.pack(fill="both", expand=True)
        buttons = tk.Frame(middle)
        buttons.pack(side="left", fill="y", padx=(12, 0))
        for text, command in [("Open", self.open), ("Up", self.up), ("New Folder", self.new_folder),
                              ("Rename", self.rename), ("Move", self.move), ("Delete", self.delete)]:
            tk.Button(buttons, text=text, width=10, command=command).pack(side="top", pady=3)

        self.bar = tk.Frame(root)
        self.bar.pack(side="top", fill="x", pady=(10, 0))
        tk.Label(self.bar, textvariable=self.prompt).pack(side="left")
        self.entry = tk.Entry(self.bar, textvariable=self.answer, width=22)
        self.ok = tk.Button(self.bar, text="OK", width=6, command=self.confirm)
        self.cancel = tk.Button(self.bar, text="Cancel", width=6, command=self.drop)
        tk.Label(root, textvariable=self.status, anchor="w").pack(side="top", fill="x", pady=(8, 0))

        self.listbox.bind("<Double-Button-1>", lambda e: self.open())
        self.listbox.bind("<Return>", lambda e: self.open())
        self.listbox.bind("<BackSpace>", lambda e: self.up())
        self.listbox.bind("<Delete>", lambda e: self.delete())
        self.listbox.bind("<F2>", lambda e: self.rename())
        self.entry.bind("<Return>", lambda e: self.confirm())
        self.entry.bind("<Escape>", lambda e: self.drop())
        root.bind("<Control-n>", lambda e: self.new_folder())
        root.bind("<Control-m>", lambda e: self.move())
        root.bind_class("Entry", "<Control-a>", lambda e: (e.widget.selection_range(0, "end"),
                                                           e.widget.icursor("end"), "break")[-1])
        self.show(folder)

    # -- the view

    def show(self, folder: Path, select: str | None = None) -> None:
        self.folder = folder
        self.root.title(f"Files - {folder.name or folder}")
        home = Path.home()
        self.location.set("~/" + str(folder.relative_to(home)) if folder.is_relative_to(home) and folder != home
                          else "~" if folder == home else str(folder))
        try:
            entries = sorted(folder.iterdir(), key=lambda p: (not p.is_dir(), p.name.lower()))
        except OSError as e:
            entries = []
            self.status.set(f"Cannot read this folder: {e.strerror}")
        self.names = [p.name for p in entries]
        self.listbox.delete(0, "end")
        for p in entries:
            self.listbox.insert("end", p.name + ("/" if p.is_dir() else ""))
        if select in self.names:
            i = self.names.index(select)
            self.listbox.selection_set(i)
            self.listbox.activate(i)
            self.listbox.see(i)
        self.listbox.focus_set()

    def selected(self) -> Path | None:
        sel = self.listbox.curselection()
        if not sel:
            self.status.set("Select a file or folder first")
            return None
        return self.folder / self.names[sel[0]]

    # -- actions

    def open(self) -> None:
        path = self.selected()
        if path is None:
            return
        if path.is_dir():
            self.status.set("")
            self.show(path)
        else:
            self.status.set(f"{path.name} is a file, not a folder")

    def up(self) -> None:
        if self.folder.parent != self.folder:
            self.status.set("")
            self.show(self.folder.parent, select=self.folder.name)

    def ask(self, action: str, prompt: str, path: Path | None, initial: str | None) -> None:
        self.pending = (action, path)
        self.prompt.set(prompt)
        self.status.set("")
        if initial is not None:
            self.answer.set(initial)
            self.entry.pack(side="left", padx=8)
        else:
            self.entry.pack_forget()
        self.ok.pack(side="left", padx=4)
        self.cancel.pack(side="left", padx=4)
        if initial is not None:
            self.entry.focus_set()
            self.entry.selection_range(0, "end")
            self.entry.icursor("end")
        else:
            self.ok.focus_set()
            self.ok.bind("<Return>", lambda e: self.confirm())
            self.ok.bind("<Escape>", lambda e: self.drop())

    def drop(self) -> None:
        self.pending = None
        self.prompt.set("")
        for widget in (self.entry, self.ok, self.cancel):
            widget.pack_forget()
        self.listbox.focus_set()

    def new_folder(self) -> None:
        self.ask("new", "New folder name:", None, "")

    def rename(self) -> None:
        path = self.selected()
        if path is not None:
            self.ask("rename", f"Rename {path.name} to:", path, path.name)

    def move(self) -> None:
        path = self.selected()
        if path is not None:
            self.ask("move", f"Move {path.name} into folder:", path, "")

    def delete(self) -> None:
        path = self.selected()
        if path is not None:
            self.ask("delete", f"Delete {path.name}?", path, None)

    def confirm(self) -> None:
        if self.pending is None:
            return
        action, path = self.pending
        answer = self.answer.get().strip()
        select = None
        try:
            if action in ("new", "rename"):
                if not answer or "/" in answer or answer in (".", ".."):
                    self.status.set("Type a name (without /)")
                    return
                target = self.folder / answer
                if target.exists() and target != path:
                    self.status.set(f"{answer} already exists")
                    return
                if action == "new":
                    target.mkdir()
                    self.status.set(f"Created folder {answer}")
                else:
                    path.rename(target)
                    self.status.set(f"Renamed {path.name} to {answer}")
                select = answer
            elif action == "move":
                folder = (self.folder / Path(answer).expanduser()).resolve() if answer else None
                if folder is None or not folder.is_dir():
                    self.status.set(f"No folder named {answer}" if answer else "Type a folder name")
                    return
                if (folder / path.name).exists():
                    self.status.set(f"{folder.name} already has {path.name}")
                    return
                if path.is_dir() and (folder == path or path in folder.parents):
                    self.status.set("A folder cannot move into itself")
                    return
                shutil.move(str(path), str(folder / path.name))
                self.status.set(f"Moved {path.name} to {folder.name}")
            elif action == "delete":
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path)
                else:
                    path.unlink()
                self.status.set(f"Deleted {path.name}")
        except OSError as e:
            self.status.set(f"Failed: {e.strerror or e}")
            return
        status = self.status.get()
        self.drop()
        self.show(self.folder, select=select)
        self.status.set(status)


def main(path: str) -> None:
    folder = Path(path).expanduser().resolve()
    folder.mkdir(parents=True, exist_ok=True)
    root = tk.Tk(className="files")
    root.geometry("720x560+0+0")  # a fixed size: the bottom bar does not resize it
    root.option_add("*Font", UI_FONT)
    root.option_add("*Background", "white")
    root.option_add("*highlightBackground", "white")
    # a button under the pointer keeps its text black: Tk's default drew it pale on grey, which OCR did not read
    # ("New Folder" vanished from the text view after a click on it, so a second folder could not be made)
    root.option_add("*activeForeground", "black")
    root.configure(padx=16, pady=12, background="white")
    Files(root, folder)
    root.mainloop()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "~")
