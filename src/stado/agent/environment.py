"""The environment a job's shell is given (pure): cleared to the execution-runtime variables the agent
has, plus the job's own (JOB_NAMES), the variables its spec sets (`stado submit --env`), and nothing else.
CARGO_BUILD_JOBS and the thread-count variables (THREAD_NAMES) are the cores reserved for the job (a job's --env
may set a thread count of its own); on an agent that declares accelerator devices, every accelerator variable
names exactly the devices reserved for the job (empty when it reserved none), whatever the agent's own
environment or the job's --env says."""

RUNTIME_NAMES = (
    "PATH", "HOME", "USER", "LOGNAME", "TMPDIR", "TZ", "LANG",
    "http_proxy", "https_proxy", "no_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY",
    "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS",
    "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES",
)
RUNTIME_PREFIXES = ("LC_",)
ACCELERATOR_NAMES = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES")
THREAD_NAMES = ("CARGO_BUILD_JOBS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
JOB_NAMES = ("STADO_BIN", "WC_JOB_ID", "WC_JOB_STARTED_AT", "WC_ARTIFACT_INPUTS_JSON", "WC_ARTIFACT_INPUTS_FILE",
             "GIT_TERMINAL_PROMPT", "CARGO_NET_GIT_FETCH_WITH_CLI") + THREAD_NAMES


SHIM_NAME = "stado"  # in the job's directory: what $STADO_BIN names when its agent serves a store of its own


def store_env_text(store_env: dict[str, str | None]) -> str:
    """The lines that give a shell the variables that open the agent's store (`store_env`: None for one to
    unset): what the work root's store file holds (hostfiles.store_env_file), sourced by each job's shim."""
    unset = sorted(k for k, v in store_env.items() if v is None)
    sets = sorted((k, v) for k, v in store_env.items() if v is not None)
    lines = ["# the variables that open this work root's agents' store (read by each job's $STADO_BIN)"]
    if unset:
        lines.append("unset " + " ".join(unset))
    if sets:
        lines.append("export " + " ".join(f"{k}={_quoted(v)}" for k, v in sets))
    return "\n".join(lines) + "\n"


def shim_text(stado_bin: str, env_file: str, job_id: str) -> str:
    """A shell script that runs the agent's own program on the agent's store, so that a job calling `$STADO_BIN`
    reaches the store its agent serves while its own environment holds neither STADO_CONFIG nor the store's
    credentials. It names the file that holds those (`env_file`, outside every job's directory, readable by this
    user alone) and holds no credential itself: a job's directory never carries a secret."""
    missing = (f"stado: the store settings of the agents of this work root are gone ({env_file}): start an agent "
               "on this work root again")
    return "\n".join([
        "#!/bin/sh",
        f"# $STADO_BIN of job {job_id}: its agent's stado, on its agent's store (removed when the job ends)",
        f"[ -r {_quoted(env_file)} ] || {{ echo {_quoted(missing)} >&2; exit 4; }}",
        f". {_quoted(env_file)}",
        f'exec {_quoted(stado_bin)} "$@"',
    ]) + "\n"


def _quoted(value: str) -> str:
    return "'" + value.replace("'", "'\\''") + "'"


def is_runtime_name(name: str) -> bool:
    return name in RUNTIME_NAMES or name.startswith(RUNTIME_PREFIXES)


def job_environment(agent_env: dict[str, str], *, stado_bin: str, job_id: str, started_at: str, inputs_json: str,
                    inputs_file: str, cores: int, devices: tuple[str, ...] | None = None,
                    spec_env: tuple[tuple[str, str], ...] = ()) -> dict[str, str]:
    """devices: the accelerator devices reserved for the job, or None on an agent that manages none (then its
    own accelerator variables, if any, pass through as runtime variables); spec_env: the job's --env pairs."""
    env = {k: v for k, v in agent_env.items() if is_runtime_name(k)}
    env.update(dict.fromkeys(THREAD_NAMES, str(cores)))
    env.update(spec_env)
    env.update({
        "STADO_BIN": stado_bin,
        "WC_JOB_ID": job_id,
        "WC_JOB_STARTED_AT": started_at,
        "WC_ARTIFACT_INPUTS_JSON": inputs_json,
        "WC_ARTIFACT_INPUTS_FILE": inputs_file,
        "GIT_TERMINAL_PROMPT": "false",
        "CARGO_NET_GIT_FETCH_WITH_CLI": "true",
    })
    if devices is not None:
        env.update(dict.fromkeys(ACCELERATOR_NAMES, ",".join(devices)))
    return env
