# model-manager: the two set-up commands are `make run` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
HELM   := $(VENV)/bin/helm
LOCAL  ?= .local
PORT   ?= 8443
BENCH  ?=
ADDRESS ?= 127.0.0.1:0
REPO   ?=
HUB_ARGS ?=
REGISTRAR_BINARY ?= ../shared/kube/bin/csi-node-driver-registrar.xz
NODE   ?= $(shell hostname | tr '[:upper:]' '[:lower:]')

.DEFAULT_GOAL := help
.PHONY: help install run test lint bench demo hub chart-readme csi-proto etcd-proto image clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml clients/python/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	$(PY) -m pip install --quiet -e clients/python
	$(MAKE) --no-print-directory csi-proto
	$(MAKE) --no-print-directory etcd-proto
	touch $(STAMP)

$(HELM): .ci/install-helm $(STAMP)
	bash .ci/install-helm $(HELM)

install: $(STAMP) $(HELM) ## create the virtualenv and install the project with its dev tools and Helm

csi-proto: ## regenerate the CSI gRPC stubs from nodeplugin/csi/csi.proto
	@if [ -f nodeplugin/csi/csi.proto ]; then \
	  mkdir -p nodeplugin/csi/gen && \
	  $(PY) -m grpc_tools.protoc -I nodeplugin/csi --python_out=nodeplugin/csi/gen \
	    --grpc_python_out=nodeplugin/csi/gen --pyi_out=nodeplugin/csi/gen nodeplugin/csi/csi.proto && \
	  sed -i 's/^import csi_pb2 as csi__pb2/from . import csi_pb2 as csi__pb2/' nodeplugin/csi/gen/csi_pb2_grpc.py && \
	  touch nodeplugin/csi/gen/__init__.py; \
	fi

etcd-proto: ## regenerate the etcd v3 gRPC stubs from apiserver/storage/etcd/rpc.proto
	mkdir -p apiserver/storage/etcd/gen
	$(PY) -m grpc_tools.protoc -I apiserver/storage/etcd --python_out=apiserver/storage/etcd/gen \
	  --grpc_python_out=apiserver/storage/etcd/gen --pyi_out=apiserver/storage/etcd/gen \
	  apiserver/storage/etcd/rpc.proto
	sed -i 's/^import rpc_pb2 as rpc__pb2/from . import rpc_pb2 as rpc__pb2/' apiserver/storage/etcd/gen/rpc_pb2_grpc.py
	touch apiserver/storage/etcd/gen/__init__.py

run: $(STAMP) ## run the API server standalone on https://127.0.0.1:$(PORT) with SQLite under .local/, keeping a NodeModelStore for this machine ($(NODE))
	$(PY) -m apiserver --standalone --data-dir $(LOCAL) --port $(PORT) --node $(NODE)

test: $(STAMP) $(HELM) ## run the whole test suite (unit and integration)
	$(PY) -m pytest -q

lint: $(STAMP) ## ruff, mypy --strict and the import-linter layer contracts
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(VENV)/bin/mypy --strict --python-version 3.10 clients/python/model_manager_client
	$(VENV)/bin/lint-imports

demo: $(STAMP) ## the whole flow on this machine: server, fixture hub, node plugin, a mount (root)
	$(PY) -m demo

hub: $(STAMP) ## the fixture hub on ADDRESS=host:port serving REPO=owner/name=dir (HUB_ARGS: more flags; docs/hub.md)
	$(PY) -m devkit.fixturehub --address $(ADDRESS) $(if $(REPO),--repo $(REPO)) $(HUB_ARGS)

chart-readme: $(STAMP) ## regenerate the values table of charts/model-manager/README.md from the schema
	$(PY) charts/model-manager/readme.py --write

image: $(STAMP) ## build the model-manager image (and the tests' registrar image) as OCI archives in $(LOCAL)/images (root, mmdebstrap; images/Containerfile is the recipe)
	$(PY) images/build.py image --out $(LOCAL)/images
	@if [ -f $(REGISTRAR_BINARY) ]; then \
	  $(PY) images/build.py registrar --binary $(REGISTRAR_BINARY) --out $(LOCAL)/images; \
	else echo "no $(REGISTRAR_BINARY): the registrar test image is not built"; fi

bench: $(STAMP) ## run the benchmarks (BENCH=name for one); results in bench/results/
	$(PY) -m bench $(BENCH)

clean: ## remove the virtualenv and local state
	rm -rf $(VENV) $(LOCAL) bench/results
