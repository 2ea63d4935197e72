"""Extracts Jane Austen's six novels from Debian's r-cran-janeaustenr into paragraphs (JSON).

Usage: python3 extract_austen.py OUT.json [R_DATA_PREFIX]
The R package stores each novel as a character vector of wrapped lines; paragraphs are
separated by blank lines. Underscores (italics markers) are removed.
"""
import json
import re
import sys

from read_rdata import read_lazy_load_db

TITLES = {
    "sensesensibility": "Sense and Sensibility",
    "prideprejudice": "Pride and Prejudice",
    "mansfieldpark": "Mansfield Park",
    "emma": "Emma",
    "northangerabbey": "Northanger Abbey",
    "persuasion": "Persuasion",
}
HEADING = re.compile(r"^(chapter|volume)\s+[0-9ivxlc]+\.?$", re.IGNORECASE)


def paragraphs(lines):
    out, current = [], []
    for line in lines:
        line = (line or "").strip()
        if line:
            current.append(line)
        elif current:
            out.append(" ".join(current))
            current = []
    if current:
        out.append(" ".join(current))
    return [re.sub(r"\s+", " ", p.replace("_", "")).strip() for p in out]


def main():
    out_path = sys.argv[1]
    prefix = sys.argv[2] if len(sys.argv) > 2 else "/usr/lib/R/site-library/janeaustenr/data/Rdata"
    data = read_lazy_load_db(prefix)
    books = []
    for key, title in TITLES.items():
        chapters, current = [], None
        for para in paragraphs(data[key].value):
            if HEADING.match(para):
                if para.lower().startswith("chapter"):
                    current = {"heading": para, "paragraphs": []}
                    chapters.append(current)
                continue
            if current is not None:
                current["paragraphs"].append(para)
        books.append({"title": title, "chapters": chapters})
        print(title, len(chapters), "chapters", sum(len(c["paragraphs"]) for c in chapters), "paragraphs")
    with open(out_path, "w") as f:
        json.dump({"books": books}, f)


if __name__ == "__main__":
    main()
