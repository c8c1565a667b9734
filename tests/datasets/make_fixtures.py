"""Writes the small MAD and Who&When fixtures under tests/datasets/data/ (hand-made, in the public
shapes; no released data). Run it to regenerate: python tests/datasets/make_fixtures.py"""
from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).parent / "data"

CHATDEV = """[2025-11-03 10:00:00 INFO] **[Preprocessing]**

**ChatDev Starts** (20251103100000)

[2025-11-03 10:00:01 INFO] Chief Product Officer: **Chief Product Officer<->Chief Executive Officer on : DemandAnalysis, turn 0**

[ChatDev is a software company powered by agents.]
We should make the tip calculator a desktop app.

[2025-11-03 10:00:04 INFO] Chief Executive Officer: **Chief Executive Officer<->Chief Product Officer on : DemandAnalysis, turn 1**

<INFO> Application

[2025-11-03 10:00:09 INFO] Programmer: **Programmer<->Chief Technology Officer on : Coding, turn 0**

main.py
```python
print("tip")
```
"""

METAGPT = """=== MetaGPT team run: write a prime checker ===
--------------------------------------------------------------------------------
FROM: Human
TO: SimpleCoder
ACTION: UserRequirement
CONTENT:
Write a function is_prime(n).
--------------------------------------------------------------------------------
NEW MESSAGES:

SimpleCoder: def is_prime(n): return n > 1 and all(n % d for d in range(2, n))
--------------------------------------------------------------------------------
NEW MESSAGES:

SimpleTester: assert is_prime(7) and not is_prime(8)
=== end ===
"""

AG2_YAML = """problem: What is 12 * 7?
trajectory:
- content: What is 12 * 7? Answer with a number.
  role: user
  name: mathproxyagent
- content: 12 * 7 = 84. The answer is 84.
  role: assistant
  name: assistant
- content: Correct, TERMINATE
  role: user
  name: mathproxyagent
"""

MAGENTIC = """SCENARIO.PY STARTING !#!#
---------- user ----------
How many stars does the repo have?
---------- MagenticOneOrchestrator ----------
Please look up the repository page.
---------- WebSurfer ----------
I typed the repository name into the search bar. The page shows 1.2k stars.
---------- MagenticOneOrchestrator ----------
FINAL ANSWER: 1200
SCENARIO.PY COMPLETE !#!#
"""

APPWORLD = """Using the apps, play my most liked song.

Response from Supervisor Agent
I will ask the spotify agent for the liked songs.


Message to spotify Agent
Find my most liked song.

Reply from spotify Agent
Your most liked song is 'Blue'.

Code Execution Output

Playing 'Blue'.
"""

HYPER = """HyperAgent_demo__repo-1 - INFO - Initialized HyperAgent instance
HyperAgent_demo__repo-1 - INFO - Planner's Response: Thought: find where the bug is.
Intern Name: Codebase Navigator
Subgoal: Locate the function parse_date.
HyperAgent_demo__repo-1 - INFO - Inner-Navigator-Assistant's Response: It is in utils/dates.py.
HyperAgent_demo__repo-1 - INFO - Navigator->Planner: parse_date is in utils/dates.py line 10.
HyperAgent_demo__repo-1 - INFO - Planner's Response: Thought: the fix is done.
"""

OPENMANUS = """2025-03-10 12:00:00.100 | INFO     | app.agent.base:run:140 - Executing step 1/20
2025-03-10 12:00:01.200 | INFO     | app.agent.toolcall:think:81 - \u2728 Manus's thoughts: I should search the web.
2025-03-10 12:00:01.300 | INFO     | app.agent.toolcall:think:82 - \U0001f6e0\ufe0f Manus selected 1 tools to use
2025-03-10 12:00:03.400 | INFO     | app.agent.toolcall:act:150 - \U0001f3af Tool 'web_search' completed its mission! Result: three pages
with more lines
2025-03-10 12:00:04.000 | INFO     | app.agent.toolcall:think:81 - \u2728 Manus's thoughts: Done.
"""

PLAIN = "The system printed a summary and stopped. No agent turns here.\n"

CODES = [f"{c}.{i}" for c, n in ((1, 5), (2, 6), (3, 3)) for i in range(1, n + 1)]


def marks(ones=(), nulls=(), all_null=False):
    if all_null:
        return {c: None for c in CODES}
    return {c: (None if c in nulls else int(c in ones)) for c in CODES}


def full(mas, llm, bench, tid, key, text, ann, **extra):
    return {"mas_name": mas, "llm_name": llm, "benchmark_name": bench, "trace_id": tid,
            "trace": {"key": key, "index": tid, "trajectory": text}, "mast_annotation": ann, **extra}


FULL = [
    full("ChatDev", "GPT-4o", "ProgramDev", 1, "chatdev_tip_1", CHATDEV, marks(ones=("1.1", "3.2"))),
    full("MetaGPT", "GPT-4o", "ProgramDev", 2, "metagpt_prime_2", METAGPT, marks()),
    full("AG2", "GPT-4", "GSM-Plus", 3, "ag2_math_3", AG2_YAML, marks(all_null=True)),
    full("Magentic", "GPT-4o", "GAIA", 4, "magentic_stars_4", MAGENTIC, marks(ones=("2.6",), nulls=("3.3",))),
    full("AppWorld", "GPT-4o", "AppWorld", 5, "appworld_song_5", APPWORLD, marks(ones=("1.3",))),
    full("HyperAgent", "Claude-3.5", "SWE-Bench-Lite", 6, "hyper_dates_6", HYPER, marks(ones=("3.1",))),
    full("OpenManus", "GPT-4o", "MMLU", 7, "openmanus_web_7", OPENMANUS, marks(ones=("2.3", "3.3")),
         run_note="kept in metadata"),
    # same (mas_name, llm_name, trace_id) as the first record: trace.key tells them apart
    full("ChatDev", "GPT-4o", "ProgramDev", 1, "chatdev_tip_1_rerun", PLAIN, marks(ones=("1.5",))),
]

FULL_BAD = [
    full("ChatDev", "GPT-4o", "ProgramDev", 10, "ok_10", CHATDEV, marks(ones=("1.2",))),
    {"mas_name": "ChatDev", "llm_name": "GPT-4o", "trace_id": 11, "trace": {"key": "k11"}, "mast_annotation": {}},
    {"mas_name": "ChatDev", "trace": {"trajectory": "text"}, "mast_annotation": {"1.1": 1}},
    full("MetaGPT", "GPT-4o", "ProgramDev", 12, "odd_12", METAGPT, {"1.1": 2, "9.9": 1, "2.1": 1}),
    full("MetaGPT", "GPT-4o", "ProgramDev", 13, "odd_13", METAGPT, "not an object"),
]


def human(rnd, mas, tid, text, modes):
    """modes: {"<code> <name>": (a1, a2, a3)}"""
    return {"round": rnd, "mas_name": mas, "benchmark_name": "ProgramDev", "trace_id": tid, "trace": text,
            "annotations": [{"failure mode": f"{code}\nDefinition of {code.split(' ', 1)[1].lower()}.",
                             "annotator_1": a, "annotator_2": b, "annotator_3": c}
                            for code, (a, b, c) in modes.items()]}


R2 = "1.1 Disobey task specification", "2.1 Conversation reset", "3.3 Incorrect verification"
# Round 2 (17-mode draft): per mode and run the three annotators' marks; hand computation in the tests
HUMAN = [
    human("Round 2", "ChatDev", "h1", CHATDEV, {R2[0]: (True, True, True), R2[1]: (False, False, False),
                                              R2[2]: (False, False, False)}),
    human("Round 2", "MetaGPT", "h2", METAGPT, {R2[0]: (True, True, False), R2[1]: (False, False, False),
                                              R2[2]: (False, False, False)}),
    human("Round 3", "AG2", "h3", AG2_YAML, {R2[0]: (False, False, False), R2[1]: (True, True, True),
                                           R2[2]: (False, False, False)}),
    human("Round 3", "Magentic", "h4", MAGENTIC, {R2[0]: (True, False, False), R2[1]: (False, False, False),
                                                R2[2]: (False, False, False)}),
    # Round 1 (18-mode draft): 4.2 exists only there; 5.1 exists nowhere (reported, not labelled)
    human("Round 1", "ChatDev", "h5", CHATDEV, {"4.2 Draft-only mode": (True, False, True),
                                              "5.1 Not a mode": (True, True, True)}),
    # a later round: the published 14
    human("Round 4", "HyperAgent", "h6", HYPER, {"3.3 Incorrect verification": (False, True, False)}),
]

WW_HAND = {
    "history": [
        {"content": "How many studio albums were published by the band between 2000 and 2009?", "role": "human"},
        {"content": "Plan: ask WebSurfer to open the discography page.", "role": "Orchestrator (thought)"},
        {"content": "Please open the band's discography page and list the studio albums.",
         "role": "Orchestrator (-> WebSurfer)"},
        {"content": "I opened the page. Studio albums: A (2001), B (2004), C (2009), D (2011).", "role": "WebSurfer"},
        {"content": "Counting: A, B, C, D gives 4.", "role": "Orchestrator (thought)"},
        {"content": "FINAL ANSWER: 4", "role": "Orchestrator (termination condition)"},
    ],
    "question": "How many studio albums were published by the band between 2000 and 2009?",
    "ground_truth": "3", "is_correct": False, "question_ID": "q-albums-01", "level": "1",
    "mistake_agent": "Orchestrator", "mistake_step": "4",
    "mistake_reason": "It counted the 2011 album, outside the range.",
}
WW_ALGO = {
    "history": [
        {"content": "Find the year the library was founded.", "role": "user"},
        {"content": "I will search the archive.", "role": "assistant", "name": "Research_Expert"},
        {"content": "exitcode: 0 (execution succeeded)\nCode output: 1890", "role": "user", "name": "Computer_terminal"},
        {"content": "The library was founded in 1980.", "role": "assistant", "name": "Verification_Expert"},
        {"content": "TERMINATE", "role": "assistant", "name": "Research_Expert"},
    ],
    "question": "Find the year the library was founded.", "ground_truth": "1890", "is_corrected": False,
    "question_ID": "q-library-02", "mistake_agent": "Verification_Expert", "mistake_step": "3",
    "mistake_reason": "It misread the terminal output 1890 as 1980.",
    "system_prompt": {"Research_Expert": "You research facts.", "Verification_Expert": "You verify answers."},
}
WW_BAD_STEP = {**WW_ALGO, "question_ID": "q-bad-step", "mistake_step": "17"}
WW_NO_HISTORY = {"question": "x", "question_ID": "q-empty", "history": [], "mistake_agent": "A", "mistake_step": "0"}


def main() -> None:
    HERE.mkdir(exist_ok=True)
    (HERE / "MAD_full_dataset.json").write_text(json.dumps(FULL, indent=1) + "\n", encoding="utf-8")
    (HERE / "MAD_full_bad.json").write_text(json.dumps(FULL_BAD, indent=1) + "\n", encoding="utf-8")
    (HERE / "MAD_human_labelled_dataset.json").write_text(json.dumps(HUMAN, indent=1) + "\n", encoding="utf-8")
    ww = HERE / "whowhen"
    (ww / "Hand-Crafted").mkdir(parents=True, exist_ok=True)
    (ww / "Algorithm-Generated").mkdir(parents=True, exist_ok=True)
    (ww / "Hand-Crafted" / "1.json").write_text(json.dumps(WW_HAND, indent=4) + "\n", encoding="utf-8")
    (ww / "Algorithm-Generated" / "2.json").write_text(json.dumps(WW_ALGO, indent=4) + "\n", encoding="utf-8")
    bad = HERE / "whowhen_bad"
    bad.mkdir(exist_ok=True)
    (bad / "3.json").write_text(json.dumps(WW_BAD_STEP, indent=4) + "\n", encoding="utf-8")
    (bad / "4.json").write_text(json.dumps(WW_NO_HISTORY, indent=4) + "\n", encoding="utf-8")
    (bad / "5.json").write_text('{"history": [{"content": "a", "role": "user"}], "question_ID": ', encoding="utf-8")


if __name__ == "__main__":
    main()
