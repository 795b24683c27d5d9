# cudampi — top-level Makefile
#
#   make [build]        cargo build --release; build/lib/libcudampi.so{,.0} -> target/release
#   make fixture        the stand-in CUDA driver for GPU-less tests (tests/fixture/fixture.mk)
#   make mpis           every MPI the tests run on (tests/mpi/setup.sh; no root needed)
#   make test           the layer check, cargo test --release, then every C test on every MPI
#                       (tests/run-matrix.sh; its last line is "N passed, N failed")
#   make layers         scripts/layers.py: src/ imports only downward, no import circle
#   make demo           scripts/demo.sh
#   make install        PREFIX=/usr/local (and DESTDIR=, LIBDIR=$(PREFIX)/lib): LIBDIR/libcudampi.so.0,
#                       LIBDIR/libcudampi.so, include/cudampi.h, include/cudampi-ext/mpi-ext.h
#                       (first on the include path of pkg-config --cflags cudampi),
#                       LIBDIR/pkgconfig/cudampi.pc, bin/cudampi-run
#   make wheel          build/dist/cudampi-VERSION-py3-none-manylinux_*.whl (pip install cudampi)
#   make deb            build/dist/cudampi_VERSION_ARCH.deb (packaging/deb/build.sh)
#   make header         regenerate include/cudampi.h with cbindgen, when it is installed
#   make clean          cargo clean, and build/ except the downloaded MPIs (distclean: all)
#
# MATRIX_ARGS passes options to the harness: make test MATRIX_ARGS="--mpi ompi4 --test large"

SHELL := bash
.SHELLFLAGS := -e -o pipefail -c
.DEFAULT_GOAL := all
.DELETE_ON_ERROR:

CARGO ?= cargo
PREFIX ?= /usr/local
LIBDIR ?= $(PREFIX)/lib
DESTDIR ?=
MATRIX_ARGS ?=

LIB := target/release/libcudampi.so
VERSION := $(or $(shell sed -n 's/^version *= *"\(.*\)"/\1/p' Cargo.toml 2>/dev/null | head -n 1),0.0.0)

# The stand-in CUDA driver: defines the `fixture` target, FIXTURE_LIB and FIXTURE_INC.
-include tests/fixture/fixture.mk
FIXTURE_LIB ?= build/fixture/lib
FIXTURE_INC ?= tests/fixture/include
ifeq ($(wildcard tests/fixture/fixture.mk),)
fixture:
	@echo "make fixture: tests/fixture/fixture.mk does not exist yet" >&2; exit 1
endif

.PHONY: all build fixture mpis test layers demo install wheel deb dist header clean distclean

all: build

build:
	$(CARGO) build --release
	@mkdir -p build/lib
	ln -sfn ../../$(LIB) build/lib/libcudampi.so.0
	ln -sfn libcudampi.so.0 build/lib/libcudampi.so

mpis:
	tests/mpi/setup.sh

# A lower layer of src/ that imports a higher one, or an import circle, fails the build.
layers:
	python3 scripts/layers.py

# cargo test runs first and its result is handed to the harness, which counts it and prints
# "N passed, N failed" as the last line; the recipe fails when either failed.
test: layers build fixture mpis
	@mkdir -p build/logs
	$(MAKE) --no-print-directory fixture-selftest
	@rc=0; $(CARGO) test --release 2>&1 | tee build/logs/cargo-test.log || rc=$$?; \
	CARGO_TEST_RC=$$rc FIXTURE_LIB='$(FIXTURE_LIB)' FIXTURE_INC='$(FIXTURE_INC)' \
		tests/run-matrix.sh $(MATRIX_ARGS)

demo: build fixture mpis
	bash scripts/demo.sh

install:
	@test -f $(LIB) || { echo "make install: $(LIB) is missing; run make first" >&2; exit 1; }
	install -d $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/bin
	install -m 755 scripts/cudampi-run $(DESTDIR)$(PREFIX)/bin/cudampi-run
	install -m 755 $(LIB) $(DESTDIR)$(LIBDIR)/libcudampi.so.0
	ln -sfn libcudampi.so.0 $(DESTDIR)$(LIBDIR)/libcudampi.so
	install -m 644 include/cudampi.h $(DESTDIR)$(PREFIX)/include/cudampi.h
	install -d $(DESTDIR)$(PREFIX)/include/cudampi-ext
	install -m 644 include/cudampi-ext/mpi-ext.h $(DESTDIR)$(PREFIX)/include/cudampi-ext/mpi-ext.h
	printf '%s\n' \
		'prefix=$(PREFIX)' \
		'exec_prefix=$${prefix}' \
		'libdir=$(LIBDIR)' \
		'includedir=$${prefix}/include' \
		'' \
		'Name: cudampi' \
		'Description: Makes a non-CUDA-aware MPI accept GPU device buffers (link before -lmpi)' \
		'Version: $(VERSION)' \
		'Libs: -L$${libdir} -Wl,--no-as-needed -lcudampi' \
		'Cflags: -I$${includedir}/cudampi-ext -I$${includedir}' \
		>$(DESTDIR)$(LIBDIR)/pkgconfig/cudampi.pc

wheel: build
	CUDAMPI_PREBUILT_LIB=$(LIB) python3 packaging/python/cudampi_build.py wheel build/dist

deb: build
	packaging/deb/build.sh build/dist

# The release tarball (crates vendored) and a Spack repository that builds it.
dist:
	packaging/dist.sh build/dist

header:
	@if command -v cbindgen >/dev/null; then \
		cbindgen --config cbindgen.toml --output include/cudampi.h; \
	else \
		echo "make header: cbindgen is not installed (cargo install cbindgen); include/cudampi.h unchanged"; \
	fi

clean:
	$(CARGO) clean
	rm -rf build/lib build/tests build/logs build/fixture

distclean: clean
	rm -rf build
