# The dashboards' browser tests (tests/ui) drive Debian's Chromium through Playwright's Python package (pinned in
# pyproject's `test` extra). `playwright install` downloads a browser of its own, which cannot be had here: the
# tests launch /usr/bin/chromium by its path, and fail (never skip) without it.
CHROMIUM := /usr/bin/chromium

test-deps:: $(CHROMIUM)

$(CHROMIUM):
	$(SUDO) apt-get update -qq && $(SUDO) DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium
	test -x $@
