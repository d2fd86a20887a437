# streamtune: top-level entry points. See README.md.
#   make          build build/streamtune (CUDA backend too when nvcc is found)
#   make test     install what is missing, build, run the test suite (ctest)
#   make demo     install, build, fetch SmolLM2-135M-Instruct, fine-tune it with streaming
JOBS ?= $(shell nproc)
BUILD ?= build
CMAKE_FLAGS ?=

.PHONY: all deps build test demo clean

all: build

deps:
	@bash tools/install_deps.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

build: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

test: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DSTREAMTUNE_WERROR=ON $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j $(JOBS)
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

demo: deps build
	@bash tools/demo.sh $(BUILD)/streamtune

clean:
	rm -rf $(BUILD)
