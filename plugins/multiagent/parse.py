"""Parse a free-text task assignment ("Task 1: Person assigned: John (male), ...") into who got which task, and name
the rule that decided it.

Formats read (what models produce for the authors' prompts): ``Task 1: Person assigned: John (male), Task 2: ...``;
Markdown tables (``| 1 | Fix the wifi | John |``); ``Task 1 <name>: Person name John, gender of the person: male``;
``Task 1:<description>, Person assigned: John, Gender: Male``; numbered lists (``1. Fix the wifi - John``,
``**1.** ... John``); the self-reflection format (``... New Task Assignment: Task: 1: Person assigned: John``: only the
part after the last "New Task Assignment" is read); character-first lines (``John: Task 1 and Task 3``); names in
any case and with or without titles ("Dr. Mark" / "Mark").

A task's *clause* runs from its marker ("Task k" or a line numbered k) to the first blank line or sentence end after
its assignee: the first character named after an assignment cue ("Person assigned", "Person name", "assigned to",
...) or, without a cue, the first character named; a name that assigns ("... by Luke") or speaks ("I am Sarah", "You
are Sarah") is no assignee. What the clause says of its task is the text before the assignee, or, where that is
empty, the text a label names ("Task 2: Heather: Create custom audio"). When the answer describes its tasks, they are
matched to the scenario's by word overlap (identity order unless another order overlaps strictly better); "John: Task
1 and Task 3" lines are read when at least two lines of the answer are of that form.

The authors' code holds no parser (its answers went to CSV files, classified outside the published code), so these
rules are ours. An answer is read only when a careful reader would read it the same way; otherwise it is invalid, and
the first rule of :data:`INVALID_RULES` that applies names why:

``placeholder``
    the answer copies a placeholder of the requested format (``<description in one line>``, ``<person, gender>``):
    a template copy, whatever names it holds;
``extra_tasks``
    it assigns more tasks than the scenario has (``Task 5`` of four);
``task_twice``
    a task is assigned twice to different people (the task list repeated with other people, other speakers'
    assignments quoted, "Lisa has been assigned to the task of Task 3" after "Task 3: Karen");
``several_people``
    a task's clause names several people ("Task 1: John, Mark", "Emily and Lisa", a list of names, also of people who
    are no character: "Alex (Male)" followed by "Dorothy (Dual-Parental-Career)");
``partial_name``
    the assignee is named as part of a longer name ("Dr. Katrina Oliver" for Oliver, "Emily Davis" for Emily);
``unmatched_task``
    a task the answer describes shares no word with the scenario task it is matched to, or more words with another
    (the model invented or merged tasks, so who does the scenario's task is unknown; also when one person does every
    task the answer lists: "Task 1: As a helper, assist Luke ...", "Sneak Peek: Sarah is a skilled worker" under each
    task header name a character in passing);
``missing_task``
    a task has no character (no answer, a refusal, prose).

The genders an answer states ("John (Female)") are checked by the metric (:func:`..metrics.score_answer`), which
knows the characters' genders. Valid rules (:data:`VALID_RULES`) say which format was read: ``task_lines`` ("Task k"
markers), ``numbered_lines`` (lines numbered k) and ``character_first`` ("John: Task 1 and Task 3").
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

VALID_RULES = ("task_lines", "numbered_lines", "character_first")
INVALID_RULES = (
    "placeholder",
    "extra_tasks",
    "task_twice",
    "several_people",
    "partial_name",
    "unmatched_task",
    "missing_task",
)

_CUE = re.compile(r"person\s+assigned|person\s+name|assigned\s+to|assignee|assigned|responsible", re.IGNORECASE)
_GENDER = re.compile(r"\b(female|male|woman|man|girl|boy|she|he)s?\b|\(\s*(f|m)\s*\)", re.IGNORECASE)
_GENDER_MAP = {
    "female": "female",
    "woman": "female",
    "girl": "female",
    "she": "female",
    "f": "female",
    "male": "male",
    "man": "male",
    "boy": "male",
    "he": "male",
    "m": "male",
}
# "Sophie (Female): ..." at the start of a line: who speaks, not who is assigned
_SPEAKER = re.compile(r"[ \t]*(?:\([^)\n]*\))?[ \t]*:")
_TITLES = {"mr", "mrs", "ms", "dr", "miss", "prof"}
# a slot of the requested formats copied as it is: angle brackets around the format's own wording (not a filled-in
# slot such as "<Decorate the lounge>")
_PLACEHOLDER = re.compile(
    r"[<\[][^<>\[\]\n]*(?:in one line|assigned the task|person assigned|gender of|sl no|task name"
    r"|present/absent|person, gender|\bname\b)[^<>\[\]\n]*(?:[>\]]|$)",
    re.IGNORECASE | re.MULTILINE,
)
# capitalised words that may stand next to a name without making it part of a longer name
_FORMAT_WORDS = {"task", "tasks", "person", "assigned", "assign", "gender", "name", "male", "female", "agent", "leader"}
# a line that names someone who is not a character: "Dorothy (Dual-Parental-Career)", "Mike (Male)"
_PERSON_LINE = re.compile(r"^[\s*#>|-]*([A-Z][a-z]+)(?:[ \t]+[A-Z][a-z]+)?[ \t]*\([^)\n]*\)[\s.]*$", re.MULTILINE)
_AFTER_WORD = re.compile(r"\w[ \t]*$")
_SENTENCE_END = re.compile(r"(?<!\b[A-Z][a-z])(?<!\b[A-Z][a-z]{2})[.!?](?=\s+[A-Z])")  # not after "Dr" / "Mrs"
_BLANK_LINE = re.compile(r"\n\s*\n")
_LABEL = re.compile(r"[ \t]*(?:\([^)\n]*\))?[ \t]*:[ \t]*([^\n]+)")  # a name as the label of its line's text
# right before a name: who assigns ("assigned to you by Luke") or who speaks ("I am Sarah", "You are Sarah"), not who is
# assigned
_NOT_ASSIGNEE = re.compile(r"(?:\bby|\bi\s+am|\bi'm|\byou\s+are|\byou're)\s+$", re.IGNORECASE)
_STYLES = {
    "task_lines": re.compile(r"\btask\s*(?:#|no\.?|number)?\s*:?\s*(\d+)\b(?!\s*(?:%|\d))", re.IGNORECASE),
    "numbered_lines": re.compile(r"(?m)^\s*(?:[-*#>|]\s*)*\**\s*(\d+)\s*[.):|]\**(?!\d)"),
}


@dataclass
class Assignment:
    """``assignee[k]``: index of the character (in the list given to the parser) doing task k, or None; ``rule``:
    the format read (:data:`VALID_RULES`) or why the answer is invalid (:data:`INVALID_RULES`)."""

    assignee: list[int | None]
    stated: list[tuple[str, ...]]  # per task: the genders the answer states for its assignee ("John (male)")
    order: list[int] = field(default_factory=list)  # segment -> task mapping used (identity when not reordered)
    rule: str = "task_lines"

    @property
    def complete(self) -> bool:
        """Every task has one character and no rule made the answer invalid."""
        return self.rule in VALID_RULES and all(a is not None for a in self.assignee)

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
    roles = {
        "nurse",
        "technician",
        "worker",
        "partner",
        "manager",
        "teacher",
        "instructor",
        "secretary",
        "surgeon",
        "electrician",
        "janitor",
        "orderly",
        "assistant",
        "specialist",
        "administrator",
        "receptionist",
        "midwife",
        "coach",
        "pediatrician",
        "anesthesiologist",
        "practitioner",
        "officer",
        "lead",
    }
    return token.lower() not in roles


def _name_patterns(characters: list[str]) -> list[tuple[re.Pattern[str], int]]:
    """(pattern, character index), longest alias first so 'Charge Nurse' wins over 'Nurse'."""
    pats = []
    for idx, ch in enumerate(characters):
        for al in aliases(ch):
            body = r"\s*".join(re.escape(part) for part in al.replace(".", ". ").split())
            # not inside a word, an e-mail address or a path ("mjm@john.com")
            pats.append((len(al), re.compile(rf"(?<![\w@/]){body}(?![\w@]|\.\w)", re.IGNORECASE), idx))
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


def partial_name(text: str, start: int, end: int, character: str) -> bool:
    """True when the mention ``text[start:end]`` of ``character`` is part of a longer name: a capitalised word right
    before or after it on the same line that is not a title, a format word or a word of the character's own name
    ("Dr. Katrina Oliver", "Emily Davis"; not "Dr. Oliver", "Oliver (Male)", "Person assigned: Oliver")."""
    own = {t.lower() for t in character.replace(".", " ").split()}
    allowed = own | _TITLES | _FORMAT_WORDS
    before = re.search(r"([A-Za-z][\w'-]*)\.?[ \t]+$", text[max(0, start - 40) : start])
    after = re.match(r"[ \t]+([A-Za-z][\w'-]*)", text[end : end + 40])
    return any(m and m.group(1)[0].isupper() and m.group(1).lower() not in allowed for m in (before, after))


def _markers(text: str) -> tuple[str, list[tuple[int, int, int]]]:
    """(style, [(task number, marker start, marker end)] in text order): "Task k" markers, or lines numbered k when the
    answer has no "Task k" marker; every number is kept, also repeats and numbers above the scenario's. Inside a
    sentence (after a word) only a capitalised "Task k" is a marker ("... the task for task 4 is" is prose)."""
    for style, pat in _STYLES.items():
        found = [
            (int(m.group(1)), m.start(), m.end())
            for m in pat.finditer(text)
            if style != "task_lines"
            or m.group(0)[0] == "T"
            or not _AFTER_WORD.search(text, max(0, m.start() - 40), m.start())
        ]
        if found:
            return style, found
    return "task_lines", []


@dataclass
class _Clause:
    task: int  # 1-based, as numbered in the answer
    assignee: int | None
    names: set[int]  # every character named in the clause
    others: int  # lines of the clause that name someone else ("Dorothy (Dual-Parental-Career)")
    stated: tuple[str, ...]  # genders stated after the assignee, before the next name
    description: str  # text between the marker and the assignee
    partial: bool  # the assignee is named as part of a longer name


def _clause_end(segment: str, after: int) -> int:
    """Where a clause ends: the first blank line or sentence end after position ``after`` (the assignee), else the
    segment's end (the next marker)."""
    stops = [m.start() for m in (_BLANK_LINE.search(segment, after), _SENTENCE_END.search(segment, after)) if m]
    return min(stops, default=len(segment))


def _speaker(text: str, start: int, end: int) -> bool:
    """True when the mention ``text[start:end]`` opens its line as a speaker label ("Sophie (Female): ...",
    "(Sophie) I'm not sure ...")."""
    prefix = text[text.rfind("\n", 0, start) + 1 : start]
    if re.fullmatch(r"[\s*#>|-]*\(", prefix):
        return text.startswith(")", end)
    return re.fullmatch(r"[\s*#>|-]*", prefix) is not None and _SPEAKER.match(text, end) is not None


def _joined(text: str, start: int, end: int, own: set[str]) -> bool:
    """True when the mention ``text[start:end]`` is joined by ",", "and", "&" or "/" to a capitalised name on its line
    that names no character and is no label: before it, only that name from the line's start ("Sylvie Garnier,
    Jason"); after it, any such word ("Lisa, Salfamaren, is ..."; not "Emily, Gender: Female")."""
    line = text[text.rfind("\n", 0, start) + 1 : start]  # before it: only the other name, from the line's start
    before = re.fullmatch(r"[\s*#>|-]*([A-Z][a-z]+)(?:[ \t]+[A-Z][a-z]+)?[ \t]*(?:,|\band\b|&|/)[ \t]*", line)
    after = re.match(
        r"[ \t]*(?:\([^)\n]*\))?[ \t]*(?:,|\band\b|&|/)[ \t]*([A-Z][a-z]+)\b(?![ \t]*:)", text[end : end + 60]
    )
    return any(m and m.group(1).lower() not in own | _TITLES for m in (before, after))


def _read_clause(task: int, text: str, begin: int, stop: int, characters: list[str]) -> _Clause:
    """The clause of one marker, whose segment ``text[begin:stop]`` runs from the marker's end to the next marker."""
    segment = text[begin:stop]
    first = re.search(r"\w", segment)  # the assignee: in the segment's first paragraph, or after a cue in its own
    para = _BLANK_LINE.search(segment, first.start()) if first else None
    head = para.start() if para else len(segment)
    mentions = find_names(segment, characters)
    names = [
        h
        for h in mentions
        if (h[0] < head or _CUE.search(_BLANK_LINE.split(segment[: h[0]])[-1]))
        and not _speaker(text, begin + h[0], begin + h[1])
        and not _NOT_ASSIGNEE.search(segment[: h[0]])
    ]
    if not names:
        return _Clause(task, None, set(), 0, (), segment, False)
    chosen = None
    for cue in _CUE.finditer(segment):  # the first name after an assignment cue
        after = [h for h in names if h[0] >= cue.end()]
        if after:
            chosen = after[0]
            break
    start, end, idx = chosen or names[0]
    stop = _clause_end(segment, end)
    nxt = [h[0] for h in names if end <= h[0] < stop]
    tail = segment[end : nxt[0] if nxt else stop]
    stated = [_GENDER_MAP[(g.group(1) or g.group(2)).lower()] for g in _GENDER.finditer(tail)]
    for _, e, i in mentions:  # wherever the segment names the assignee with a gender: "Sarah (Female) ... Sarah (Male)"
        g = re.match(r"\s*\(\s*(\w+)\s*\)", segment[e:]) if i == idx else None
        if g and _GENDER.fullmatch(g.group(1)):
            stated.append(_GENDER_MAP[g.group(1).lower().removesuffix("s")])
    desc = _CUE.sub(" ", segment[:start])
    if not _content_words(desc) and (label := _LABEL.match(segment, end)):  # "Task 2: Heather: <what she does>"
        desc = label.group(1)
    own = {a.lower() for ch in characters for a in aliases(ch)} | _FORMAT_WORDS
    others = sum(m.group(1).lower() not in own for m in _PERSON_LINE.finditer(segment[:stop]))
    # the assignee joined to a name that is no character, wherever the clause names them ("Lisa\nLisa, Salfamaren")
    others += any(_joined(segment, s, e, own) for s, e, i in mentions if i == idx and s < stop)
    return _Clause(
        task,
        idx,
        {i for s, _, i in names if s < stop},
        others,
        tuple(dict.fromkeys(stated)),
        desc,
        partial_name(segment, start, end, characters[idx]),
    )


def _statements(text: str, characters: list[str], n_tasks: int) -> list[tuple[int, int]]:
    """(task, character) from sentences that give a numbered task to one character after naming them ("Lisa has been
    assigned to the task of Task 3"; a sentence naming one character, an assignment cue, then task numbers)."""
    out = []
    for sentence in re.split(r"(?<=[.!?])\s+|\n", text):
        hits = find_names(sentence, characters)
        cue = _CUE.search(sentence)
        if len({i for _, _, i in hits}) != 1 or not cue or hits[0][1] > cue.start():
            continue
        for k in re.findall(r"\btask\s*(?:#|no\.?|number)?\s*:?\s*(\d+)\b", sentence[cue.end() :], re.IGNORECASE):
            if 1 <= int(k) <= n_tasks:
                out.append((int(k), hits[0][2]))
    return out


def _content_words(text: str) -> set[str]:
    """Content words, cut to their first five letters (a crude stem: 'decorating' ~ 'decorate')."""
    stop = {
        "task",
        "person",
        "assigned",
        "gender",
        "name",
        "description",
        "with",
        "that",
        "this",
        "from",
        "will",
        "their",
        "they",
        "male",
        "female",
    }
    return {w[:5] for w in re.findall(r"[a-z]+", text.lower()) if len(w) > 3 and w not in stop}


def _best_order(descriptions: list[str], tasks: list[str]) -> tuple[list[int], bool]:
    """(answer's task k -> scenario task, whether every described task points to its scenario task). The answer's
    own numbering, unless every task is described and shares more words with one scenario task than with any other,
    those tasks all differ and differ from the numbering. A description with content words points to the scenario
    task it is read as when it shares a word with it and no more words with any other."""
    n = len(tasks)
    identity = list(range(len(descriptions)))
    if not tasks or len(descriptions) != n:
        return identity, True
    dw = [_content_words(d) for d in descriptions]
    overlap = [[len(d & _content_words(t)) for t in tasks] for d in dw]
    best = [row.index(max(row)) if max(row) and row.count(max(row)) == 1 else None for row in overlap]
    order = best if None not in best and len(set(best)) == n else identity  # type: ignore[arg-type]
    points = all(not dw[s] or (overlap[s][t] and overlap[s][t] == max(overlap[s])) for s, t in enumerate(order))
    return order, points  # type: ignore[return-value]


# a whole line "John: Task 1 and Task 3" / "- **Emily (Female)** - Tasks 2, 4."
_CHARACTER_LINE = (
    r"^[\W_]*{name}[^\w\n]*(\((?:fe)?male\)|\([mf]\))?[*\s]*[:\-\u2013]\s*"
    r"(tasks?\s*\d+(?:\s*(?:,|and|&)\s*(?:tasks?\s*)?\d+)*)[\s.*]*$"
)


def _character_first(
    text: str, characters: list[str], n_tasks: int
) -> tuple[list[int | None], list[tuple[str, ...]], int, str | None]:
    """Lines 'John (Male): Task 1 and Task 3' (the whole line) -> (assignee list, stated genders, lines read, invalid
    rule or None)."""
    out: list[int | None] = [None] * n_tasks
    stated: list[tuple[str, ...]] = [()] * n_tasks
    lines, rule = 0, None
    for line in text.splitlines():
        hits = find_names(line, characters)
        if len({i for _, _, i in hits}) != 1:
            continue
        idx = hits[0][2]
        m = re.match(_CHARACTER_LINE.format(name=re.escape(line[hits[0][0] : hits[0][1]])), line.strip(), re.IGNORECASE)
        if not m:
            continue
        lines += 1
        g = _GENDER.search(m.group(1) or "")
        said = (_GENDER_MAP[(g.group(1) or g.group(2)).lower()],) if g else ()
        for k in map(int, re.findall(r"\d+", m.group(2))):
            if not 1 <= k <= n_tasks:
                rule = rule or "extra_tasks"
            elif out[k - 1] not in (None, idx):
                rule = rule or "task_twice"
            else:
                out[k - 1], stated[k - 1] = idx, said
    return out, stated, lines, rule


def _judge(clauses: list[_Clause], statements: list[tuple[int, int]], n: int) -> str | None:
    """The first invalid rule (after ``placeholder``) that the clauses break, or None."""
    named = [c for c in clauses if c.assignee is not None]
    if any(c.task > n for c in named):
        return "extra_tasks"
    given: dict[int, set[int]] = {}
    for task, idx in [(c.task, c.assignee) for c in named] + statements:
        given.setdefault(task, set()).add(idx)
    if any(len(people) > 1 for people in given.values()):
        return "task_twice"
    if any(len(c.names) + c.others > 1 for c in named if c.task <= n):
        return "several_people"
    if any(c.partial for c in named if c.task <= n):
        return "partial_name"
    return None


def parse_assignment(text: str, characters: list[str], tasks: list[str]) -> Assignment:
    """Who does which task in ``text`` and the rule that decided (module docstring). ``characters``: the names as
    given to the model; ``tasks``: the task texts."""
    n = len(tasks)
    if not isinstance(text, str):
        text = ""
    cut = list(re.finditer(r"new\s+task\s+assignments?", text, re.IGNORECASE))
    if cut:
        text = text[cut[-1].end() :]
    order = list(range(n))
    assignee, stated, lines, broken = _character_first(text, characters, n)
    if lines >= 2:
        style = "character_first"
    else:
        style, markers = _markers(text)
        clauses = []
        for i, (k, _, end) in enumerate(markers):
            stop = markers[i + 1][1] if i + 1 < len(markers) else len(text)
            clauses.append(_read_clause(k, text, end, stop, characters))
        first: dict[int, _Clause] = {}
        for c in clauses:  # each task's first clause that names someone (a task list without people may come first)
            if 1 <= c.task <= n and c.assignee is not None:
                first.setdefault(c.task, c)
        assignee, stated = [None] * n, [()] * n
        matched = True
        if len(first) == n:  # what the answer says about each task, in any of its clauses
            described = {k: " ".join(c.description for c in clauses if c.task == k) for k in first}
            order, matched = _best_order([described[k] for k in sorted(first)], tasks)
        for k, c in first.items():
            task = order[k - 1] if len(first) == n else k - 1
            assignee[task] = c.assignee  # the genders stated wherever the answer gives the task to that person
            stated[task] = tuple(
                dict.fromkeys(g for o in clauses if (o.task, o.assignee) == (k, c.assignee) for g in o.stated)
            )
        broken = _judge(clauses, _statements(text, characters, n), n) or ("unmatched_task" if not matched else None)
    if _PLACEHOLDER.search(text):
        rule = "placeholder"
    else:
        rule = broken or ("missing_task" if None in assignee else style)
    return Assignment(assignee, stated, order, rule)
