# vramkit: a small Makefile over CMake.
#   make deps   install the Debian packages building and running need (only missing ones)
#   make deps-test  those and the packages the tests need (make test runs it)
#   make        configure and build into build/
#   make run    the main job: the video service on sample clips (faces found, live table)
#   make models the service's default models (BlazeFace, batch symbolic) into build/models
#   make replay replay the sample traces under every policy
#   make test   every CPU test: unit/integration, ASan+UBSan, TSan, fuzzers
#   make install  the libraries, headers, CLI, man page, pkg-config and CMake
#               files under PREFIX (default /usr/local), staged under DESTDIR
#   make bench  benchmarks (bench/results/)
BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
FUZZ_SECONDS ?= 60
CMAKE_FLAGS ?=
PREFIX ?= /usr/local

.PHONY: all deps deps-test build run models replay test install bench clean

all: build

deps:
	@bash scripts/deps.sh run

deps-test:
	@bash scripts/deps.sh test

build:
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

run: deps build
	bash scripts/run_demo.sh $(BUILD)

models:
	bash scripts/models.sh $(BUILD)/models

replay: deps build
	./$(BUILD)/vramkit replay --policy vmm data/traces/*.csv.gz
	./$(BUILD)/vramkit replay --policy segments data/traces/*.csv.gz

test: deps-test build
	bash scripts/test.sh $(BUILD) $(FUZZ_SECONDS)

# DESTDIR is read from the environment or the command line by cmake --install.
install: build
	DESTDIR=$(DESTDIR) cmake --install $(BUILD) --prefix $(PREFIX)

bench: deps build
	./$(BUILD)/bench_replay --out bench/results/replay.md \
	  --commit $$(git rev-parse --short HEAD 2>/dev/null || echo unknown) \
	  $(wildcard data/traces/*.csv.gz) $(wildcard ../shared/data/traces/*.csv.gz)
	./$(BUILD)/bench_monitor --out bench/results/monitor.md \
	  --commit $$(git rev-parse --short HEAD 2>/dev/null || echo unknown) $(wildcard data/traces/*.csv.gz)

clean:
	rm -rf $(BUILD) build-asan build-tsan build-fuzz
