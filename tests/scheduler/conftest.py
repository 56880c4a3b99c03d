"""The scheduler tests (re-adoption, restart) run on stado's fixtures: the same servers and stores."""
from tests.stado.conftest import (azurite, make_stado_env, open_test_store, seaweedfs, stado_env,  # noqa: F401
                                  store_options, store_target, store_url)
from tests.stado.e2e.conftest import no_leftover_processes, store  # noqa: F401
