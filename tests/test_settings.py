"""Settings are read from the environment, and bad ones are reported by name."""

import re
from pathlib import Path

import pytest
from annotated_types import Ge, Gt, Le, Lt
from pydantic.fields import FieldInfo

from bot.process.settings import VARIABLES, Settings, SettingsError, load_settings
from bot.turn.worker import WorkerTiming
from gates.config import ActionPolicy
from gates.store import DEFAULT_LEASE_S
from graph.config import GraphLimits, ModelSpec, TempoSpec


@pytest.fixture(autouse=True)
def _no_settings_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)


def test_defaults_give_the_documented_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("TOOL_BUDGET", "RECURSION_LIMIT", "TRACE_MAX_REVISIONS", "LLM_MODEL"):
        monkeypatch.delenv(name, raising=False)
    settings = load_settings(_env_file=None)
    limits = settings.limits
    assert (limits.tool_budget, limits.recursion_limit, limits.trace_max_revisions) == (8, 25, 2)
    assert settings.model.model == "google_genai:gemini-3.8-flash"


def test_environment_variables_override_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOL_BUDGET", "3")
    monkeypatch.setenv("TEMPO_URL", "http://tempo:3200")
    monkeypatch.setenv("TEMPO_TENANT", "acme")
    settings = load_settings(_env_file=None)
    assert settings.limits.tool_budget == 3
    assert settings.tempo_spec().tenant == "acme"


def test_the_defaults_are_the_ones_the_typed_configs_own() -> None:
    settings = Settings(_env_file=None, tempo_url="http://tempo:3200")
    assert settings.limits == GraphLimits()
    assert settings.actions == ActionPolicy()
    assert settings.model == ModelSpec()
    assert settings.tempo_spec() == TempoSpec(url="http://tempo:3200")
    assert settings.worker == WorkerTiming()
    assert settings.kubernetes.action_lease == DEFAULT_LEASE_S  # the action store's lease


OUT_OF_RANGE = [
    ("TOOL_BUDGET", "0", "0 is below the minimum 1"),
    ("RECURSION_LIMIT", "2", "2 is below the minimum 3"),
    ("TRACE_MAX_REVISIONS", "-1", "-1 is below the minimum 0"),
    ("CLAIM_MAX_REVISIONS", "-1", "-1 is below the minimum 0"),
    ("GROUNDING_MAX_REVISIONS", "-1", "-1 is below the minimum 0"),
    (
        "GROUNDING_TIME_TOLERANCE",
        "-1",
        "'-1' is not a duration like 900, 900s, 15m or 1h (got '-1')",
    ),
    ("TRACE_VERIFY_CONCURRENCY", "0", "0 is below the minimum 1"),
    ("CONTEXT_BUDGET_TOKENS", "199", "199 is below the minimum 200"),
    ("FULL_TOOL_RESULTS", "-1", "-1 is below the minimum 0"),
    ("QUESTION_MAX_CHARS", "99", "99 is below the minimum 100"),
    ("RUBRIC_MAX_ITERATIONS", "0", "0 is below the minimum 1"),
    ("GRADER_MAX_STEPS", "-1", "-1 is below the minimum 0"),
    ("LLM_TIMEOUT", "0", "0 must be more than 0"),
    ("LLM_MAX_RETRIES", "11", "11 is above the maximum 10"),
    ("TEMPO_TIMEOUT", "0", "0 must be more than 0"),
    ("PROMETHEUS_TIMEOUT", "0", "0 must be more than 0"),
    ("LOKI_TIMEOUT", "-1", "-1 must be more than 0"),
    ("MAX_SCALE_FACTOR", "1", "1 must be more than 1"),
    ("MAX_REPLICAS", "0", "0 is below the minimum 1"),
    ("BREAKER_FAILURE_THRESHOLD", "0", "0 is below the minimum 1"),
    ("BREAKER_WINDOW_MINUTES", "0", "0 is below the minimum 1"),
    ("BREAKER_MAX_ACTIONS_PER_TARGET", "0", "0 is below the minimum 1"),
    ("BREAKER_MAX_ACTIONS_GLOBAL", "0", "0 is below the minimum 1"),
    ("APPROVAL_TTL", "10s", "10s is shorter than the minimum 30s"),
    ("ROLLOUT_WATCH_TIMEOUT", "0m", "0s must be longer than 0s"),
    ("ACTION_LEASE", "0", "0s must be longer than 0s"),
    ("RECONCILE_INTERVAL", "0h", "0s must be longer than 0s"),
    ("SHUTDOWN_GRACE", "601", "601 is above the maximum 600"),
    ("RECOVERY", "9", "9 is below the minimum 10"),
    ("WORKER_CONCURRENCY", "1001", "1001 is above the maximum 1000"),
    ("PORT", "65536", "65536 is above the maximum 65535"),
    ("PROGRESS_INTERVAL", "-0.5", "-0.5 is below the minimum 0"),
    ("APPROVER_GROUP_CACHE", "-1", "-1 is below the minimum 0"),
    ("CHECKPOINT_TTL_MINUTES", "0", "0 must be more than 0"),
    ("REDIS_FAILOVER_TIMEOUT", "0", "0 must be more than 0"),
    ("REDIS_SOCKET_TIMEOUT", "301", "301 is above the maximum 300"),
    ("THREAD_CONTEXT_MESSAGES", "1001", "1001 is above the maximum 1000"),
    ("THREAD_CONTEXT_CHARS", "999", "999 is below the minimum 1000"),
    ("RUBRIC_MAX_CHARS", "40001", "40001 is above the maximum 40000"),
    ("KUBE_TIMEOUT", "0", "0 must be more than 0"),
    ("MAX_ATTEMPTS", "21", "21 is above the maximum 20"),
    ("MODEL_RPM", "-1", "-1 is below the minimum 0"),
    ("MODEL_TPM", "-1", "-1 is below the minimum 0"),
    ("MODEL_RATE_WINDOW", "2h", "2h is longer than the maximum 1h"),
    ("MODEL_WAIT_MAX", "25h", "25h is longer than the maximum 24h"),
    ("MODEL_FALLBACK_AFTER", "2h", "2h is longer than the maximum 1h"),
    ("THREAD_TOKEN_BUDGET", "-1", "-1 is below the minimum 0"),
    ("CHANNEL_DAILY_TOKEN_BUDGET", "-5", "-5 is below the minimum 0"),
    ("AUTO_INVESTIGATIONS_PER_HOUR", "-1", "-1 is below the minimum 0"),
    ("INVESTIGATIONS_PER_USER_PER_HOUR", "0", "0 is below the minimum 1"),
    ("INVESTIGATIONS_PER_CHANNEL_PER_HOUR", "0", "0 is below the minimum 1"),
    ("AUTO_INVESTIGATION_DAILY_TOKEN_BUDGET", "-1", "-1 is below the minimum 0"),
]


@pytest.mark.parametrize(("name", "value", "problem"), OUT_OF_RANGE)
def test_a_value_out_of_bounds_is_reported_under_its_own_variable(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, problem: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError) as refused:
        load_settings(_env_file=None)
    assert str(refused.value) == f"{name}: {problem}"  # one line, that variable only
    assert not re.search(r"[a-z]+_[a-z]|_S\b", str(refused.value))  # no internal field name


def _bounded(field: FieldInfo) -> bool:
    return any(isinstance(rule, Ge | Gt | Le | Lt) for rule in field.metadata)


def test_every_bounded_setting_is_in_the_out_of_bounds_test() -> None:
    bounded = {name for name, variable in VARIABLES.items() if _bounded(variable.info)}
    assert {name for name, _, _ in OUT_OF_RANGE} == bounded


def test_a_malformed_number_is_reported_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEMPO_TIMEOUT", "soon")
    with pytest.raises(SettingsError, match=r"TEMPO_TIMEOUT: .*'soon'"):
        load_settings(_env_file=None)


def test_a_missing_tempo_url_says_what_to_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TEMPO_URL", raising=False)
    with pytest.raises(SettingsError, match="TEMPO_URL: not set; set it to your Tempo"):
        load_settings(_env_file=None).tempo_spec()


def test_the_api_key_never_appears_in_the_settings_repr(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_API_KEY", "AIza-very-secret")
    settings = load_settings(_env_file=None)
    assert "AIza-very-secret" not in repr(settings)
    assert "AIza-very-secret" not in repr(settings.model)


def test_action_settings_become_the_action_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACTIONS_ENABLED", "true")
    monkeypatch.setenv("ALLOWED_NAMESPACES", "shop, billing")
    monkeypatch.setenv("PROTECTED_DEPLOYMENTS", "shop/payment-db")
    monkeypatch.setenv("ACTION_APPROVERS", "U1,U2")
    monkeypatch.setenv("APPROVAL_TTL", "10m")
    monkeypatch.setenv("JUDGE_FAIL_MODE", "open")
    policy = load_settings(_env_file=None).actions
    assert policy.actions_enabled
    assert policy.allowed_namespaces == {"shop", "billing"}
    assert policy.protected_deployments == {"shop/payment-db"}
    assert policy.approvers == {"U1", "U2"}
    assert (policy.approval_ttl_s, policy.judge_fail_mode) == (600, "open")


def test_actions_are_off_and_system_namespaces_protected_by_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("ACTIONS_ENABLED", "PROTECTED_NAMESPACES", "APPROVAL_TTL", "JUDGE_FAIL_MODE"):
        monkeypatch.delenv(name, raising=False)
    policy = load_settings(_env_file=None).actions
    assert not policy.actions_enabled
    assert policy.protected_namespaces == {"kube-system", "kube-public", "kube-node-lease"}
    assert (policy.approval_ttl_s, policy.judge_fail_mode) == (900, "closed")


def test_a_malformed_approval_ttl_is_reported_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("APPROVAL_TTL", "soonish")
    with pytest.raises(SettingsError, match="APPROVAL_TTL: 'soonish' is not a duration like"):
        load_settings(_env_file=None)


@pytest.mark.parametrize(
    "name", ["APPROVAL_TTL", "ACTION_LEASE", "RECONCILE_INTERVAL", "ROLLOUT_WATCH_TIMEOUT"]
)
@pytest.mark.parametrize(
    ("value", "seconds"), [("900", 900), ("900s", 900), ("15m", 900), ("1h", 3600)]
)
def test_a_duration_is_written_in_seconds_minutes_or_hours(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, seconds: int
) -> None:
    monkeypatch.setenv(name, value)
    variable = VARIABLES[name]
    group = getattr(load_settings(_env_file=None), variable.group)
    assert getattr(group, variable.field) == seconds


def test_an_action_lease_shorter_than_an_execution_is_reported_by_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KUBE_TIMEOUT", "10")
    monkeypatch.setenv("ACTION_LEASE", "30s")
    with pytest.raises(
        SettingsError,
        match=r"ACTION_LEASE: 30s is shorter than 6 × KUBE_TIMEOUT \(60s\); raise ACTION_LEASE",
    ):
        load_settings(_env_file=None)


def test_a_protected_deployment_without_namespace_is_reported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PROTECTED_DEPLOYMENTS", "payment-db")
    with pytest.raises(SettingsError, match="PROTECTED_DEPLOYMENTS: entry 'payment-db' is not"):
        load_settings(_env_file=None)


def test_an_unknown_judge_fail_mode_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUDGE_FAIL_MODE", "maybe")
    with pytest.raises(SettingsError, match="JUDGE_FAIL_MODE"):
        load_settings(_env_file=None)


def test_the_default_rubric_ships_and_can_be_written_on_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("DEFAULT_RUBRIC", raising=False)
    assert "root cause" in (load_settings(_env_file=None).rubric.checklist or "")
    monkeypatch.setenv("DEFAULT_RUBRIC", "- cause stated\\n- evidence cited")
    assert load_settings(_env_file=None).rubric.checklist == "- cause stated\n- evidence cited"
    monkeypatch.setenv("DEFAULT_RUBRIC", "")
    assert load_settings(_env_file=None).rubric.checklist is None


def test_a_fractional_rubric_max_iterations_is_refused_by_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RUBRIC_MAX_ITERATIONS", "1.5")
    with pytest.raises(
        SettingsError, match=r"^RUBRIC_MAX_ITERATIONS: '1\.5' is not a whole number$"
    ):
        load_settings(_env_file=None)


def test_every_setting_is_in_env_example() -> None:
    example = (Path(__file__).resolve().parent.parent / ".env.example").read_text()
    for name in VARIABLES:
        assert name in example, f"{name} is missing from .env.example"


def _in_env_terms(name: str, value: object) -> str:
    """A default or a bound as the environment writes it: `15m`, `false`, `1.5`, `60`."""
    if isinstance(value, bool):
        return str(value).lower()
    if VARIABLES[name].duration:
        seconds = int(value)  # type: ignore[call-overload]
        for unit, size in (("h", 3600), ("m", 60)):
            if seconds and seconds % size == 0:
                return f"{seconds // size}{unit}"
        return f"{seconds}s"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, frozenset):
        return ",".join(sorted(value))
    return str(value)


_SIGNS = {Ge: ("≥", "ge"), Gt: (">", "gt"), Le: ("≤", "le"), Lt: ("<", "lt")}


def _allowed(name: str) -> str:
    """What the code allows for a setting, as docs/configuration.md's `type` column writes it
    after the type (`whole number, 1-20`, with an en dash)."""
    rules = [rule for rule in VARIABLES[name].info.metadata if type(rule) in _SIGNS]
    bounds = {type(rule): getattr(rule, _SIGNS[type(rule)][1]) for rule in rules}
    if Ge in bounds and Le in bounds:
        return f"{_in_env_terms(name, bounds[Ge])}–{_in_env_terms(name, bounds[Le])}"
    return ", ".join(
        f"{_SIGNS[kind][0]} {_in_env_terms(name, bound)}" for kind, bound in bounds.items()
    )


def _configuration_rows() -> dict[str, list[str]]:
    """docs/configuration.md's rows, by variable: type, default, description."""
    page = (Path(__file__).resolve().parent.parent / "docs" / "configuration.md").read_text()
    rows = [line.strip("|").split(" | ") for line in page.splitlines() if line.startswith("| `")]
    return {cells[0].strip(" `"): [cell.strip() for cell in cells[1:]] for cells in rows}


def test_the_configuration_page_states_each_setting_default_and_bounds_as_the_code_does() -> None:
    rows = _configuration_rows()
    for name, variable in VARIABLES.items():
        assert name in rows, f"{name} is missing from docs/configuration.md"
        kind, default = rows[name][:2]
        allowed = kind.split(", ", 1)[1] if ", " in kind else ""
        assert allowed == _allowed(name), f"{name}: docs/configuration.md says {kind!r}"
        value = variable.info.get_default()
        if value not in (None, "", frozenset()) and name != "DEFAULT_RUBRIC":
            shown = f"`{_in_env_terms(name, value)}`"
            assert default.startswith(shown), (
                f"{name}: docs/configuration.md {default!r}, code {shown}"
            )


# --- a field inside a group is named by its variable ---------------------------------------


@pytest.mark.parametrize(
    ("name", "value", "problem", "where"),
    [
        # prefixed: THREAD_CONTEXT_ + messages
        ("THREAD_CONTEXT_MESSAGES", "-1", "-1 is below the minimum 0", ("thread", "messages")),
        # aliased: ActionPolicy.breaker_max_per_target
        (
            "BREAKER_MAX_ACTIONS_PER_TARGET",
            "x",
            "'x' is not a whole number",
            ("actions", "breaker_max_per_target"),
        ),
        # a list: ActionPolicy.protected_deployments, shown as the user wrote it
        (
            "PROTECTED_DEPLOYMENTS",
            "shop/db, nameless",
            "entry 'nameless' is not namespace/name (got 'shop/db, nameless')",
            ("actions", "protected_deployments"),
        ),
        # a duration: CapacityLimits.window_s, in the variable's own terms
        (
            "MODEL_RATE_WINDOW",
            "61m",
            "61m is longer than the maximum 1h",
            ("capacity", "window_s"),
        ),
    ],
)
def test_a_bad_value_inside_a_group_is_named_by_its_variable(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, problem: str, where: tuple[str, str]
) -> None:
    assert (VARIABLES[name].group, VARIABLES[name].field) == where  # the kind of field meant
    monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError) as refused:
        load_settings(_env_file=None)
    assert str(refused.value) == f"{name}: {problem}"


def test_a_list_is_a_set_of_names_read_from_commas(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUBRIC_EDITORS", " U1,U2 ,, *")
    rubric = load_settings(_env_file=None).rubric
    assert rubric.editors == frozenset({"U1", "U2", "*"})
    assert rubric.editor_ids() == (True, frozenset({"U1", "U2"}))


def test_every_problem_of_every_group_is_reported_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEMPO_TIMEOUT", "0")
    monkeypatch.setenv("APPROVAL_TTL", "10s")
    monkeypatch.setenv("LOG_LEVEL", "LOUD")
    with pytest.raises(SettingsError) as refused:
        load_settings("investigate", _env_file=None)
    lines = str(refused.value).splitlines()
    assert [line.split(":")[0] for line in lines] == [
        "TEMPO_TIMEOUT",
        "APPROVAL_TTL",
        "LOG_LEVEL",
        "GOOGLE_API_KEY",
        "TEMPO_URL",
    ]


def test_a_flat_override_wins_over_grouped_values() -> None:
    settings = Settings(_env_file=None, tempo_url="http://tempo:3200")
    again = Settings(_env_file=None, **settings.model_dump(), tempo_timeout=2)
    assert (again.tempo.url, again.tempo.timeout_s) == ("http://tempo:3200", 2)
