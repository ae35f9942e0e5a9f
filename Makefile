# pcapkit — make targets.  `make demo` and `make test` each build their own
# virtual environment from pyproject.toml and need nothing installed by hand
# (tests that compare with tshark skip cleanly when it is absent; .ci/run
# installs it).

PYTHON ?= python3
DEMO_VENV := .venv-demo
TEST_VENV := .venv-test
DEMO_CAPTURE ?= fixtures/tls_sse_nagle/server.pcapng

.PHONY: demo test lint bench bench-shapes bench-phases bench-linear bench-fleet bench-replay fixtures golden filters notebooks clean fuzz hostile

$(DEMO_VENV)/.stamp: pyproject.toml
	$(PYTHON) -m venv $(DEMO_VENV)
	$(DEMO_VENV)/bin/pip install -q --upgrade pip
	$(DEMO_VENV)/bin/pip install -q .
	touch $@

$(TEST_VENV)/.stamp: pyproject.toml
	$(PYTHON) -m venv $(TEST_VENV)
	$(TEST_VENV)/bin/pip install -q --upgrade pip
	$(TEST_VENV)/bin/pip install -q -e '.[test,dev]'
	touch $@

demo: $(DEMO_VENV)/.stamp
	$(DEMO_VENV)/bin/pcapkit analyze $(DEMO_CAPTURE)

test: $(TEST_VENV)/.stamp
	$(TEST_VENV)/bin/python -m pytest -q

# mypy --strict: the dissectors, and the pcapkit modules built in issue 12's layering
# (the rest of pcapkit is typed but not yet strict-clean).
STRICT := dissectors pcapkit/schema.py pcapkit/anomalies.py pcapkit/net/streams.py \
	pcapkit/net/tables.py pcapkit/align.py pcapkit/sessions/tls.py pcapkit/sessions/http.py \
	pcapkit/detect/__init__.py pcapkit/detect/base.py pcapkit/detect/spec.py \
	pcapkit/detect/registry.py pcapkit/trace.py pcapkit/report/gates.py \
	pcapkit/pytest_plugin.py pcapkit/io/capture.py pcapkit/vantage.py pcapkit/net/shard.py \
	pcapkit/replay.py pcapkit/lab/reenact.py pcapkit/lab/reenact_quic.py pcapkit/lab/pktsend.py \
	pcapkit/detect/pools.py pcapkit/detect/receiver_limited.py pcapkit/detect/counterfactual.py \
	pcapkit/rows.py pcapkit/report/coverage.py pcapkit/io/prefetch.py

lint: $(TEST_VENV)/.stamp
	$(TEST_VENV)/bin/ruff check pcapkit dissectors tests benchmarks scripts fuzz
	$(TEST_VENV)/bin/ruff format --check pcapkit dissectors tests benchmarks scripts fuzz
	$(TEST_VENV)/bin/mypy --strict --follow-imports=silent $(STRICT)

# every finding's display filter on every capture, checked with tshark (~3 min)
filters: $(TEST_VENV)/.stamp
	$(TEST_VENV)/bin/python scripts/check_filters.py

# run every notebook top to bottom and render it to HTML (outputs stay out of git)
notebooks: $(TEST_VENV)/.stamp
	$(TEST_VENV)/bin/jupyter nbconvert --to html --execute --output-dir build/notebooks notebooks/*.ipynb
	@ls build/notebooks/*.html

golden: $(TEST_VENV)/.stamp
	$(TEST_VENV)/bin/python -m pcapkit.report.golden fixtures
	git diff --stat -- fixtures/*/expected.json

bench: $(TEST_VENV)/.stamp
	$(TEST_VENV)/bin/pip install -q -e '.[bench]'
	$(TEST_VENV)/bin/python benchmarks/gen_capture.py -n 1000000 -o benchmarks/out/big.pcap --seed 1
	$(TEST_VENV)/bin/python benchmarks/run.py benchmarks/out/big.pcap --reps 3 --out benchmarks/RESULTS.md

# issue 16: `pcapkit analyze` vs tshark on four synthetic traffic shapes (bulk, sse, h2,
# quic), 100k and 1M packets (wall time, interleaved rounds)
SIZES ?= 100000,1000000
bench-shapes: $(TEST_VENV)/.stamp
	$(TEST_VENV)/bin/python benchmarks/shapes.py --sizes $(SIZES) --reps 3 --out benchmarks/RESULTS.md

# issue 16: where analyze's seconds go, phase by phase, on the 1M captures of bench-shapes
# (run it first: it generates them), beside a fifth of tshark's time
bench-phases: $(TEST_VENV)/.stamp
	$(TEST_VENV)/bin/python benchmarks/phases.py --reps 3 --tshark --out benchmarks/RESULTS.md \
		$(foreach s,bulk sse h2 quic,benchmarks/out/$(s)-1000k.pcap)

# issue 16, cost linear in packets: analyze's CPU (user+sys), wall and peak RSS per shape at
# 100k / 1M / 5M, CPU per packet and its growth; tshark -T fields at the largest size.  One
# process at a time, all niced (CPU time is the measure on a shared machine).  The 5M
# captures take ~16 GB in benchmarks/out (CAPTURE_DIRS=dir,… reuses captures made earlier);
# generating sse-5M and its analyze each peak near 9 GB.  Table: <!-- linearity --> in
# RESULTS.md.
LIN_SIZES ?= 100000,1000000,5000000
CAPTURE_DIRS ?=
bench-linear: $(TEST_VENV)/.stamp
	$(TEST_VENV)/bin/python benchmarks/shapes.py --linearity --sizes $(LIN_SIZES) --reps 1 --nice 19 --capture-dirs "$(CAPTURE_DIRS)" --out benchmarks/RESULTS.md

# Issue 20: pcapkit shard beside editcap / tshark -w, pcapkit batch on 1 and 2 Dask workers
# (benchmarks/fleet.py; a 106 MB synthetic capture split in 8)
bench-fleet: $(TEST_VENV)/.stamp
	$(TEST_VENV)/bin/python benchmarks/gen_capture.py -n 120000 -o benchmarks/out/fleet.pcap --seed 5 --no-manifest
	nice $(TEST_VENV)/bin/python benchmarks/fleet.py benchmarks/out/fleet.pcap --shards 8 --out benchmarks/FLEET.md

# Packet-level replay beside tcpreplay (issue 19; root: a throw-away network namespace)
bench-replay: $(TEST_VENV)/.stamp
	$(TEST_VENV)/bin/python benchmarks/replay_packets.py --reps 3 --out benchmarks/REPLAY.md

# Fuzzing (issue 15, fuzz/run.py): SECONDS for the file-level fuzzer plus SECONDS for the
# dissector entry points together (ENGINE=atheris: coverage-guided, needs `pip install
# atheris`).  One process: the machine is shared.  Crashes land in fuzz/work/crashes.
SECONDS ?= 600
ENGINE ?= random
fuzz: $(TEST_VENV)/.stamp
	$(TEST_VENV)/bin/python -m fuzz.run all --seconds $$(( $(SECONDS) * 2 )) --engine $(ENGINE)

# The issue's hostile inputs at full size, each under a 2 GB address-space limit
# (tests/test_hostile.py runs them scaled down).
hostile: $(TEST_VENV)/.stamp
	PCAPKIT_HOSTILE_SCALE=1 $(TEST_VENV)/bin/python -m pytest -q -p no:cacheprovider tests/test_hostile.py

fixtures: $(TEST_VENV)/.stamp
	$(TEST_VENV)/bin/pip install -q -e '.[lab]'
	$(TEST_VENV)/bin/pcapkit lab fixtures -o fixtures

clean:
	rm -rf $(DEMO_VENV) $(TEST_VENV) build *.egg-info .pytest_cache .hypothesis fuzz/work
