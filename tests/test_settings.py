"""Settings are read from the environment, and bad ones are reported by name."""

from pathlib import Path

import pytest

from bot.settings import Settings, SettingsError, load_settings


def test_defaults_give_the_documented_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("TOOL_BUDGET", "RECURSION_LIMIT", "TRACE_MAX_REVISIONS", "LLM_MODEL"):
        monkeypatch.delenv(name, raising=False)
    settings = load_settings(_env_file=None)
    limits = settings.graph_limits()
    assert (limits.tool_budget, limits.recursion_limit, limits.trace_max_revisions) == (8, 25, 2)
    assert settings.llm_model == "google_genai:gemini-3.8-flash"


def test_environment_variables_override_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOL_BUDGET", "3")
    monkeypatch.setenv("TEMPO_URL", "http://tempo:3200")
    monkeypatch.setenv("TEMPO_TENANT", "acme")
    settings = load_settings(_env_file=None)
    assert settings.graph_limits().tool_budget == 3
    assert settings.tempo_spec().tenant == "acme"


def test_a_recursion_limit_below_3_is_refused_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RECURSION_LIMIT", "2")
    with pytest.raises(SettingsError, match=r"^RECURSION_LIMIT: RECURSION_LIMIT is 2; it must be"):
        load_settings(_env_file=None)


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
    assert "AIza-very-secret" not in repr(settings.model_spec())


def test_action_settings_become_the_action_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACTIONS_ENABLED", "true")
    monkeypatch.setenv("ALLOWED_NAMESPACES", "shop, billing")
    monkeypatch.setenv("PROTECTED_DEPLOYMENTS", "shop/payment-db")
    monkeypatch.setenv("ACTION_APPROVERS", "U1,U2")
    monkeypatch.setenv("APPROVAL_TTL", "10m")
    monkeypatch.setenv("JUDGE_FAIL_MODE", "open")
    policy = load_settings(_env_file=None).action_policy()
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
    policy = load_settings(_env_file=None).action_policy()
    assert not policy.actions_enabled
    assert policy.protected_namespaces == {"kube-system", "kube-public", "kube-node-lease"}
    assert (policy.approval_ttl_s, policy.judge_fail_mode) == (900, "closed")


def test_a_malformed_approval_ttl_is_reported_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("APPROVAL_TTL", "soonish")
    with pytest.raises(SettingsError, match="APPROVAL_TTL: 'soonish' is not a duration like"):
        load_settings(_env_file=None)


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
    assert "root cause" in (load_settings(_env_file=None).rubric or "")
    monkeypatch.setenv("DEFAULT_RUBRIC", "- cause stated\\n- evidence cited")
    assert load_settings(_env_file=None).rubric == "- cause stated\n- evidence cited"
    monkeypatch.setenv("DEFAULT_RUBRIC", "")
    assert load_settings(_env_file=None).rubric is None


def test_a_bad_rubric_max_iterations_is_refused_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUBRIC_MAX_ITERATIONS", "0")
    with pytest.raises(SettingsError, match="RUBRIC_MAX_ITERATIONS: RUBRIC_MAX_ITERATIONS is '0'"):
        load_settings(_env_file=None)


def test_every_setting_is_documented_in_the_readme_and_env_example() -> None:
    root = Path(__file__).resolve().parent.parent
    readme = (root / "README.md").read_text()
    example = (root / ".env.example").read_text()
    for field in Settings.model_fields:
        name = field.upper()
        assert f"| `{name}` |" in readme, f"{name} is missing from the README settings table"
        assert name in example, f"{name} is missing from .env.example"
