"""Gemini through Vertex AI: a project, a location and Application Default Credentials (a
service-account key file whose `token_uri` is the simulator's token endpoint), no API key.
The simulator checks the grant's RS256 signature with the account's public key and answers
Vertex AI's path only with a bearer token it issued, for a project the account was granted."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from langchain_core.messages import HumanMessage

from bot.process.settings import VARIABLES, SettingsError, load_settings
from evals.cli import _live_settings
from graph.config import ModelSpec
from graph.model import make_chat_model
from sandbox import GeminiSimulator, Reply, TempoSimulator
from sandbox.scenarios import Scenario
from tests.conftest import MODEL
from tests.test_cli import _tracegate

PROJECT = "acme-incidents"
LOCATION = "europe-west4"
VERTEX_PATH = (
    f"/v1beta1/projects/{PROJECT}/locations/{LOCATION}/publishers/google/models/"
    f"{MODEL}:generateContent"
)


@dataclass(frozen=True)
class ServiceAccount:
    email: str
    key_id: str
    key: rsa.RSAPrivateKey

    @property
    def public_pem(self) -> bytes:
        return self.key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )

    def key_file(self, folder: Path, token_uri: str, key: rsa.RSAPrivateKey | None = None) -> Path:
        """The JSON key file Google hands out for the account (signed with `key`, if given)."""
        private = (key or self.key).private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        path = folder / f"{self.key_id}.json"
        path.write_text(
            json.dumps(
                {
                    "type": "service_account",
                    "project_id": PROJECT,
                    "private_key_id": self.key_id,
                    "private_key": private.decode(),
                    "client_email": self.email,
                    "client_id": "100000000000000000001",
                    "token_uri": token_uri,
                }
            )
        )
        return path


def _new_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture
def account() -> ServiceAccount:
    return ServiceAccount(
        f"tracegate@{PROJECT}.iam.gserviceaccount.com", uuid.uuid4().hex, _new_key()
    )


def _vertex_spec(gemini: GeminiSimulator, credentials: Path) -> ModelSpec:
    return ModelSpec(
        model=f"google_genai:{MODEL}",
        base_url=gemini.url,
        vertexai=True,
        project=PROJECT,
        location=LOCATION,
        credentials_file=str(credentials),
        timeout_s=10,
        max_retries=0,
    )


async def test_investigate_runs_through_vertex_ai_with_a_service_account_and_no_api_key(
    gemini: GeminiSimulator,
    tempo: TempoSimulator,
    scenario: Scenario,
    redis_url: str,
    account: ServiceAccount,
    tmp_path: Path,
) -> None:
    gemini.grant(account.email, account.key_id, account.public_pem, PROJECT)
    real = scenario.error_trace_ids[0]
    # A tool call and its answer: the second request carries the first's thought signature.
    gemini.script(Reply.call("get_trace", trace_id=real), Reply.text(f"payment-api fails: {real}."))
    env = {
        "GOOGLE_GENAI_USE_VERTEXAI": "true",
        "GOOGLE_CLOUD_PROJECT": PROJECT,
        "GOOGLE_CLOUD_LOCATION": LOCATION,
        "GOOGLE_APPLICATION_CREDENTIALS": str(account.key_file(tmp_path, f"{gemini.url}/token")),
        "GEMINI_BASE_URL": gemini.url,
        "LLM_MAX_RETRIES": "0",
        "TEMPO_URL": tempo.url,
        "REDIS_URL": redis_url,
        "DEFAULT_RUBRIC": "",
    }
    code, out, err = await _tracegate("investigate", "checkout 500s, why?", env=env)

    assert code == 0, err
    assert f"payment-api fails: {real}." in out
    assert [(r.path, r.status) for r in gemini.requests] == [(VERTEX_PATH, 200)] * 2
    (grant,) = gemini.grants  # one token, reused for both calls
    assert (grant.email, grant.error) == (account.email, "")


async def test_the_credentials_file_setting_alone_signs_the_calls(
    gemini: GeminiSimulator,
    account: ServiceAccount,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Given as a setting (from .env, say) and not in the environment, where Google's own
    search for credentials would look."""
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    gemini.grant(account.email, account.key_id, account.public_pem, PROJECT)
    gemini.script(Reply.text("hello from Vertex AI"))
    model = make_chat_model(_vertex_spec(gemini, account.key_file(tmp_path, f"{gemini.url}/token")))
    reply = await model.ainvoke([HumanMessage("hi")])
    assert reply.text == "hello from Vertex AI"
    assert [r.path for r in gemini.requests] == [VERTEX_PATH]
    assert [g.email for g in gemini.grants if g.token] == [account.email]


async def test_vertex_ai_answers_401_without_a_token_it_issued(gemini: GeminiSimulator) -> None:
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    async with aiohttp.ClientSession() as session:
        for headers in ({}, {"Authorization": "Bearer ya29.made-up"}, {"x-goog-api-key": "k"}):
            async with session.post(gemini.url + VERTEX_PATH, json=body, headers=headers) as r:
                assert r.status == 401, headers
                assert (await r.json())["error"]["status"] == "UNAUTHENTICATED"
    assert gemini.requests == []


async def test_a_grant_signed_with_a_key_the_account_does_not_have_is_refused(
    gemini: GeminiSimulator, account: ServiceAccount, tmp_path: Path
) -> None:
    gemini.grant(account.email, account.key_id, account.public_pem, PROJECT)
    forged = account.key_file(tmp_path, f"{gemini.url}/token", key=_new_key())
    model = make_chat_model(_vertex_spec(gemini, forged))
    with pytest.raises(Exception, match="Invalid JWT Signature"):
        await model.ainvoke([HumanMessage("hi")])
    assert [(g.email, g.token, g.error) for g in gemini.grants] == [
        (account.email, None, "Invalid JWT Signature.")
    ]
    assert gemini.requests == []


async def test_an_account_not_granted_the_project_is_denied(
    gemini: GeminiSimulator, account: ServiceAccount, tmp_path: Path
) -> None:
    gemini.grant(account.email, account.key_id, account.public_pem, "another-project")
    model = make_chat_model(_vertex_spec(gemini, account.key_file(tmp_path, f"{gemini.url}/token")))
    with pytest.raises(Exception, match="PERMISSION_DENIED"):
        await model.ainvoke([HumanMessage("hi")])
    assert gemini.requests == []


@pytest.fixture
def no_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No setting from the environment, and no .env (the working directory is empty)."""
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)


def _problems(**settings: object) -> list[str]:
    with pytest.raises(SettingsError) as refused:
        load_settings("investigate", tempo_url="http://tempo:3200", **settings)
    return str(refused.value).splitlines()


@pytest.mark.usefixtures("no_settings")
def test_vertex_ai_needs_a_project_and_a_location_and_no_api_key() -> None:
    assert _problems(google_genai_use_vertexai=True) == [
        "GOOGLE_CLOUD_PROJECT: not set; GOOGLE_GENAI_USE_VERTEXAI=true needs the Google Cloud "
        "project",
        "GOOGLE_CLOUD_LOCATION: not set; GOOGLE_GENAI_USE_VERTEXAI=true needs the Vertex AI region",
    ]
    settings = load_settings(
        "investigate",
        tempo_url="http://tempo:3200",
        google_genai_use_vertexai=True,
        google_cloud_project=PROJECT,
        google_cloud_location=LOCATION,
    )
    spec = settings.model
    assert (spec.vertexai, spec.project, spec.location, spec.api_key) == (
        True,
        PROJECT,
        LOCATION,
        None,
    )


@pytest.mark.usefixtures("no_settings")
def test_without_vertex_ai_the_api_key_is_required() -> None:
    assert _problems(google_cloud_project=PROJECT, google_cloud_location=LOCATION) == [
        "GOOGLE_API_KEY: not set; the agent needs a Gemini API key "
        "(or GOOGLE_GENAI_USE_VERTEXAI=true for Vertex AI)"
    ]


@pytest.mark.usefixtures("no_settings")
def test_a_credentials_file_that_does_not_exist_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    (problem,) = _problems(
        google_genai_use_vertexai=True,
        google_cloud_project=PROJECT,
        google_cloud_location=LOCATION,
        google_application_credentials=str(missing),
    )
    assert problem.startswith(f"GOOGLE_APPLICATION_CREDENTIALS: {missing} is not a file")


@pytest.mark.usefixtures("no_settings")
def test_live_evals_accept_vertex_ai_instead_of_an_api_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(SettingsError, match="GOOGLE_API_KEY: not set"):
        _live_settings(None)
    monkeypatch.setenv("GOOGLE_GENAI_USE_VERTEXAI", "true")
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", PROJECT)
    monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", LOCATION)
    assert _live_settings(None).model.vertexai
