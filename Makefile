# octop: the two commands that matter are `make demo` and `make test` (see README.md).
SHELL := /bin/bash
JOBS ?= $(shell nproc)

.PHONY: help deps demo test build bench chaos fuzz format lint clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-8s %s\n", $$1, $$2}'

deps: ## install the Debian packages octop needs (idempotent)
	@scripts/install-deps.sh

build: deps ## debug build with ASan+UBSan
	cmake --preset debug >/dev/null
	cmake --build --preset debug -j $(JOBS)

demo: deps ## build and start octopd on embedded SQLite with example tasks and the dashboard
	@scripts/demo.sh

test: deps ## build everything (ASan/UBSan, TSan, fuzz) and run every test against SQLite and a throwaway PostgreSQL
	@scripts/run-tests.sh

test-under-load: deps ## every test stage 3 times in a row with stress-ng --cpu 4 beside it (LOAD_ROUNDS, LOAD_CPUS)
	@scripts/run-under-load.sh

bench: deps ## release build and the benchmark tables (not part of make test)
	cmake --preset release >/dev/null
	cmake --build --preset release -j $(JOBS)
	@scripts/bench.sh

chaos: build ## the long chaos test: octopd nodes on one PostgreSQL under kills, freezes, restarts (CHAOS_MINUTES, default 15)
	@scripts/run-chaos.sh --long

fuzz: deps ## run each fuzz target for FUZZ_SECONDS (default 120)
	@FUZZ_SECONDS=$${FUZZ_SECONDS:-120} scripts/run-fuzz.sh

format: ## clang-format every C++ file in place
	@git ls-files '*.h' '*.cc' | xargs clang-format -i

lint: build ## clang-format check and clang-tidy over the sources
	@git ls-files '*.h' '*.cc' | xargs clang-format --dry-run --Werror
	@git ls-files 'src/*.cc' 'apps/*.cc' | xargs clang-tidy -p build/debug --quiet

clean: ## remove build output
	rm -rf build
