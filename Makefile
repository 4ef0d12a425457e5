# vramkit: a small Makefile over CMake.
#   make deps   install the Debian packages the project needs (only missing ones)
#   make        configure and build into build/
#   make run    the main job: replay the sample traces under every policy
#   make test   every CPU test: unit/integration, ASan+UBSan, TSan, fuzzers
#   make bench  benchmarks (bench/results/)
BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
FUZZ_SECONDS ?= 60
CMAKE_FLAGS ?=

.PHONY: all deps build run test test-unit test-asan test-tsan test-fuzz bench clean

all: build

deps:
	@bash scripts/deps.sh

build:
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

run: deps build
	./$(BUILD)/vramkit replay --policy vmm data/traces/*.csv.gz
	./$(BUILD)/vramkit replay --policy segments data/traces/*.csv.gz

test: deps build
	bash scripts/test.sh $(BUILD) $(FUZZ_SECONDS)

bench: deps build
	./$(BUILD)/bench_replay --out bench/results/replay.md \
	  --commit $$(git rev-parse --short HEAD 2>/dev/null || echo unknown) \
	  $(wildcard data/traces/*.csv.gz) $(wildcard ../shared/data/traces/*.csv.gz)
	./$(BUILD)/bench_monitor --out bench/results/monitor.md \
	  --commit $$(git rev-parse --short HEAD 2>/dev/null || echo unknown) $(wildcard data/traces/*.csv.gz)

clean:
	rm -rf $(BUILD) build-asan build-tsan build-fuzz
