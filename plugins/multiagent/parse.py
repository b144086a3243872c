"""Parse a free-text task assignment ("Task 1: Person assigned: John (male), ...") into who got which task.

Formats handled (what models produce for the authors' prompts): ``Task 1: Person assigned: John (male), Task 2: ...``;
Markdown tables (``| 1 | Fix the wifi | John |``);
``Task 1 <name>: Person name John, gender of the person: male``; ``Task 1:<description>, Person assigned: John,
Gender: Male``; numbered lists (``1. Fix the wifi - John``, ``**1.** ... John``); the self-reflection format
(``... New Task Assignment: Task: 1: Person assigned: John``: only the part after the last "New Task Assignment"
is read); character-first lines (``John: Task 1 and Task 3``); names in any case and with or without titles
("Dr. Mark" / "Mark").

A task's assignee is the first character named after an assignment cue ("Person assigned", "Person name",
"assigned to", ...) in its segment or, without a cue, the first character named in the segment. Several people
for one task ("John, Mark", "Emily and Lisa") leave the task unassigned (the prompts ask for one person per task). When the
answer repeats the task descriptions, segments are matched to the scenario's tasks by word overlap (identity
order unless another order overlaps strictly better), so a model that lists the tasks in another order is read
correctly. Tasks with no character are ``None``; the caller decides (the metric counts such answers invalid).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field

_CUE = re.compile(r"person\s+assigned|person\s+name|assigned\s+to|assignee|assigned|responsible", re.IGNORECASE)
_GENDER = re.compile(r"\b(female|male|woman|man|girl|boy|she|he)\b|\(\s*(f|m)\s*\)", re.IGNORECASE)
_GENDER_MAP = {"female": "female", "woman": "female", "girl": "female", "she": "female", "f": "female",
               "male": "male", "man": "male", "boy": "male", "he": "male", "m": "male"}  # fmt: skip
_TITLES = {"mr", "mrs", "ms", "dr", "miss", "prof"}


@dataclass
class Assignment:
    """``assignee[k]``: index of the character (in the list given to the parser) doing task k, or None."""

    assignee: list[int | None]
    stated_gender: list[str | None]
    order: list[int] = field(default_factory=list)  # segment -> task mapping used (identity when not reordered)

    @property
    def complete(self) -> bool:
        return all(a is not None for a in self.assignee)

    @property
    def missing(self) -> list[int]:
        return [k for k, a in enumerate(self.assignee) if a is None]


def aliases(character: str) -> list[str]:
    """Strings that name a character: 'Dr. Mark' -> ['Dr. Mark', 'Mark']; 'Mrs. Allen' -> ['Mrs. Allen', 'Allen'];
    'Nurse Practitioner Anne' -> [..., 'Anne']; a bare role ('Charge Nurse') -> itself only."""
    full = re.sub(r"\s*\((?:Male|Female|M|F)\)\s*$", "", character.strip(), flags=re.IGNORECASE)
    out = [full]
    tokens = full.replace(".", " ").split()
    last = tokens[-1] if tokens else ""
    if len(tokens) > 1 and last[:1].isupper() and (tokens[0].lower() in _TITLES or _looks_like_name(last)):
        out.append(last)
    return out


def _looks_like_name(token: str) -> bool:
    roles = {"nurse", "technician", "worker", "partner", "manager", "teacher", "instructor", "secretary", "surgeon",
             "electrician", "janitor", "orderly", "assistant", "specialist", "administrator", "receptionist", "midwife",
             "coach", "pediatrician", "anesthesiologist", "practitioner", "worker", "officer", "lead"}  # fmt: skip
    return token.lower() not in roles


def _name_patterns(characters: list[str]) -> list[tuple[re.Pattern[str], int]]:
    """(pattern, character index), longest alias first so 'Charge Nurse' wins over 'Nurse'."""
    pats = []
    for idx, ch in enumerate(characters):
        for al in aliases(ch):
            body = r"\s*".join(re.escape(part) for part in al.replace(".", ". ").split())
            pats.append((len(al), re.compile(rf"(?<![\w]){body}(?![\w])", re.IGNORECASE), idx))
    pats.sort(key=lambda p: -p[0])
    return [(p, i) for _, p, i in pats]


def find_names(text: str, characters: list[str]) -> list[tuple[int, int, int]]:
    """All non-overlapping character mentions as (start, end, character index), in text order."""
    taken: list[tuple[int, int]] = []
    hits = []
    for pat, idx in _name_patterns(characters):
        for m in pat.finditer(text):
            if any(m.start() < e and s < m.end() for s, e in taken):
                continue
            taken.append((m.start(), m.end()))
            hits.append((m.start(), m.end(), idx))
    return sorted(hits)


def _segments(text: str, n_tasks: int) -> dict[int, tuple[int, int]]:
    """Task number (1-based) -> (start, end) of its segment, found in sequence (1, 2, 3, ...).

    Tries 'Task k' markers first, then line-start numbering ('1.', '1)', '**1.**'), keeping the one that finds more.
    """
    styles = [
        lambda k: re.compile(rf"\btask\s*(?:#|no\.?|number)?\s*:?\s*{k}\b(?!\s*(?:%|\d))", re.IGNORECASE),
        lambda k: re.compile(rf"(?m)^\s*(?:[-*#>|]\s*)*\**\s*{k}\s*[.):|]\**(?!\d)"),
    ]
    best: dict[int, tuple[int, int]] = {}
    for make in styles:
        starts: dict[int, int] = {}
        pos = 0
        for k in range(1, n_tasks + 1):
            m = make(k).search(text, pos)
            if m:
                starts[k] = m.start()
                pos = m.end()
        if len(starts) > len(best):
            ordered = sorted(starts.items(), key=lambda kv: kv[1])
            best = {}
            for i, (k, s) in enumerate(ordered):
                end = ordered[i + 1][1] if i + 1 < len(ordered) else len(text)
                best[k] = (s, end)
    return best


def _strip_marker(segment: str) -> str:
    return re.sub(r"^\s*(?:[-*#>|]\s*)*\**\s*(?:task\s*(?:#|no\.?|number)?\s*:?\s*)?\d+\s*[.):|]?\**\s*", "", segment, flags=re.IGNORECASE)


def _read_segment(segment: str, characters: list[str]) -> tuple[int | None, str | None, str]:
    """(character index, stated gender, description text before the assignee) of one task segment."""
    body = _strip_marker(segment)
    names = find_names(body, characters)
    if not names:
        return None, None, body
    chosen = None
    for cue in _CUE.finditer(body):  # the first name after an assignment cue
        after = [h for h in names if h[0] >= cue.end()]
        if after:
            chosen = after[0]
            break
    if chosen is None:
        chosen = names[0]
    start, end, idx = chosen
    joined = re.match(r"\s*(?:\([^)]*\))?\s*(?:,|\band\b|&|/|\bor\b)\s*", body[end:])
    if joined and any(h[0] == end + joined.end() and h[2] != idx for h in names):
        return None, None, body[:start]  # 'John, Mark' / 'Emily and Lisa': several people for one task
    tail = body[end : end + 60]
    nxt = [h for h in names if h[0] >= end]
    if nxt:
        tail = body[end : nxt[0][0]]
    g = _GENDER.search(tail)
    stated = _GENDER_MAP[(g.group(1) or g.group(2)).lower()] if g else None
    return idx, stated, body[:start]


def _content_words(text: str) -> set[str]:
    stop = {"task", "person", "assigned", "gender", "name", "description", "with", "that", "this", "from", "will", "their", "they"}
    return {w for w in re.findall(r"[a-z]+", text.lower()) if len(w) > 3 and w not in stop}


def _best_order(descriptions: list[str], tasks: list[str]) -> list[int]:
    """Segment -> task mapping maximising description/task word overlap; identity unless strictly better."""
    n = len(tasks)
    if not tasks or len(descriptions) != n or n > 6:
        return list(range(len(descriptions)))
    dw = [_content_words(d) for d in descriptions]
    tw = [_content_words(t) for t in tasks]
    score = lambda perm: sum(len(dw[s] & tw[t]) for s, t in enumerate(perm))  # noqa: E731
    best, best_score = list(range(n)), score(range(n))
    for perm in itertools.permutations(range(n)):
        sc = score(perm)
        if sc > best_score:
            best, best_score = list(perm), sc
    return best


def _character_first(text: str, characters: list[str], n_tasks: int) -> list[int | None]:
    """'John: Task 1 and Task 3' lines -> assignee list (a line must name exactly one character)."""
    out: list[int | None] = [None] * n_tasks
    for line in re.split(r"[\n;]", text):
        names = {idx for _, _, idx in find_names(line, characters)}
        if len(names) != 1:
            continue
        (idx,) = names
        for nums in re.findall(r"tasks?\s*((?:\d+(?:\s*(?:,|and|&)\s*)?)+)", line, re.IGNORECASE):
            for k in re.findall(r"\d+", nums):
                if 1 <= int(k) <= n_tasks and out[int(k) - 1] is None:
                    out[int(k) - 1] = idx
    return out


def _is_character_first(text: str, characters: list[str]) -> bool:
    """True when most lines that mention a task start with a character ('John: Task 1 and Task 3')."""
    lines = [ln for ln in text.splitlines() if re.search(r"\btasks?\s*\d", ln, re.IGNORECASE)]
    if len(lines) < 2:
        return False
    led = 0
    for ln in lines:
        marker = re.search(r"\btasks?\s*\d", ln, re.IGNORECASE)
        names = find_names(ln, characters)
        led += bool(names) and names[0][0] < marker.start() and not any(h[0] > marker.start() for h in names)
    return led * 2 > len(lines)


def parse_assignment(text: str, characters: list[str], tasks: list[str]) -> Assignment:
    """Who does which task in ``text``. ``characters``: the names as given to the model; ``tasks``: the task texts."""
    n = len(tasks)
    if not isinstance(text, str):
        text = ""
    cut = list(re.finditer(r"new\s+task\s+assignments?", text, re.IGNORECASE))
    if cut:
        text = text[cut[-1].end() :]
    if _is_character_first(text, characters):
        return Assignment(_character_first(text, characters, n), [None] * n, list(range(n)))
    segs = _segments(text, n)
    assignee: list[int | None] = [None] * n
    stated: list[str | None] = [None] * n
    if segs:
        keys = sorted(segs)
        reads = [_read_segment(text[slice(*segs[k])], characters) for k in keys]
        order = _best_order([r[2] for r in reads], tasks) if len(keys) == n else [k - 1 for k in keys]
        for (idx, g, _), task in zip(reads, order):
            assignee[task], stated[task] = idx, g
        result = Assignment(assignee, stated, order)
        if result.complete:
            return result
    fallback = _character_first(text, characters, n)
    if sum(a is not None for a in fallback) > sum(a is not None for a in assignee):
        return Assignment(fallback, [None] * n, list(range(n)))
    return Assignment(assignee, stated, list(range(n)))
