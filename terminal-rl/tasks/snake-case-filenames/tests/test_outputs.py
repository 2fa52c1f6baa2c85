from pathlib import Path

PHOTOS = Path("/app/photos")
EXPECTED = {
    "summer_trip_day_1.jpg": "photo 1: Summer Trip - Day 1.JPG\n",
    "summer_trip_day_2.jpg": "photo 2: Summer Trip - Day 2.JPG\n",
    "beach_party.jpeg": "photo 3: Beach__Party.jpeg\n",
    "mom's_birthday.png": "photo 4: Mom's Birthday.PNG\n",
    "img_0031.jpg": "photo 5: IMG 0031.jpg\n",
    "family_dinner_2023.png": "photo 6: family-dinner   2023.Png\n",
    "already_fine.jpg": "photo 7: already_fine.jpg\n",
}


def names():
    return sorted(p.name for p in PHOTOS.iterdir())


def test_names_are_lowercase_without_spaces():
    got = names()
    assert all(n == n.lower() and " " not in n and "-" not in n for n in got), got


def test_exact_names():
    assert names() == sorted(EXPECTED)


def test_contents_follow_their_files():
    for name, text in EXPECTED.items():
        assert (PHOTOS / name).read_text() == text
