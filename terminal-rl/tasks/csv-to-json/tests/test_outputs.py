import json
from pathlib import Path

OUT = Path("/app/employees.json")
EXPECTED = [
    {"id": 101, "name": "Maria Santos", "department": "Engineering", "salary": 98000, "start_date": "2019-04-01"},
    {"id": 102, "name": "Okafor, Chidi", "department": "Sales", "salary": 67000, "start_date": "2020-11-15"},
    {"id": 103, "name": "Lena Fischer", "department": "Engineering", "salary": 105500, "start_date": "2017-02-20"},
    {"id": 104, "name": "Smith, Jr., Robert", "department": "Support", "salary": 51000, "start_date": "2022-07-05"},
    {"id": 105, "name": "Yuki Tanaka", "department": "Marketing", "salary": 72000, "start_date": "2021-01-11"},
    {"id": 106, "name": "Ahmed Khan", "department": "Sales", "salary": 69500, "start_date": "2018-09-30"},
]


def data():
    assert OUT.is_file(), "/app/employees.json was not created"
    return json.loads(OUT.read_text())


def test_is_array_of_six_objects():
    got = data()
    assert isinstance(got, list) and len(got) == 6
    assert all(isinstance(x, dict) and set(x) == set(EXPECTED[0]) for x in got)


def test_numbers_are_integers():
    for row in data():
        assert type(row["id"]) is int and type(row["salary"]) is int
        assert isinstance(row["start_date"], str)


def test_quoted_names_kept_whole():
    names = [row["name"] for row in data()]
    assert "Okafor, Chidi" in names and "Smith, Jr., Robert" in names


def test_exact_content_and_order():
    assert data() == EXPECTED
