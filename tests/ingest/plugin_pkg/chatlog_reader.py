"""A reader plugin as a user writes one (installed by tests/ingest/test_reader_plugin.py into a
temporary package with an entry point in group ``a2annotate.readers``).

Files start with ``#chatlog RUN_ID``; each further line is ``speaker -> listener: text``. OTLP
spans carrying ``chatlog.speaker`` / ``chatlog.to`` / ``chatlog.text`` attributes are read too.
"""
from app.ingest.canonical import Location
from app.ingest.readers.base import Reader, Sniff
from app.ingest.readers.builder import RunBuilder


class ChatlogReader(Reader):
    name = "chatlog"
    description = "#chatlog files: one run, lines `speaker -> listener: text`"

    def sniff(self, path):
        try:
            with open(path, "rb") as f:
                head = f.read(9)
        except OSError:
            return Sniff(0.0, "not readable")
        return Sniff(0.95, "starts with #chatlog") if head == b"#chatlog " else Sniff(0.0, "no #chatlog header")

    def read(self, path, shown):
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
        b = RunBuilder(lines[0].split(None, 1)[1].strip(), scenario="chatlog/demo", family="chatlog")
        b.principal("customer", name="The customer")
        for line in lines[1:]:
            if not line.strip():
                continue
            head, text = line.split(":", 1)
            who, to = (x.strip() for x in head.split("->"))
            if who != "customer":
                b.agent(who, principal="customer")
            b.message(who, text.strip(), to=[to])
        yield b.item(Location(shown))

    # the OTLP endpoint's side
    def sniff_spans(self, spans):
        if any("chatlog.speaker" in s.attributes for s in spans):
            return Sniff(0.9, "spans with chatlog.* attributes")
        return Sniff(0.0, "no chatlog.* attributes")

    def runs_from_spans(self, spans):
        groups = {}
        for s in spans:
            groups.setdefault(str(s.attributes.get("chatlog.run", s.trace_id)), []).append(s)
        runs = {}
        for rid, group in groups.items():
            b = RunBuilder(rid, scenario="chatlog/otlp", family="chatlog")
            b.principal("customer")
            for s in sorted(group, key=lambda s: s.start_ns or 0):
                who = s.attributes.get("chatlog.speaker", "system")
                if who not in ("customer", "system"):
                    b.agent(who, principal="customer")
                b.message(who, s.attributes.get("chatlog.text"), to=[s.attributes.get("chatlog.to")],
                          data={"otel": {"trace_id": s.trace_id, "span_id": s.span_id}})
            runs[rid] = b.build()
        return runs
