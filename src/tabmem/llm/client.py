"""A backend made fit for a grid: cached, concurrent, retried, with a progress bar.

Every answer is written to the cache the moment it arrives, so a crash loses none; identical
requests in one batch are sent once; transient failures are retried with exponential backoff
and jitter, never sooner than the server's Retry-After, which also pauses every other worker of
the model; a provider that refuses the model (wrong key, unknown model) stops the batch's
remaining queries from being sent at all. Empty completions are answers (cached, counted in
``empty_answers``); the tests score them as misses.

Every fresh answer's reported token usage is counted (``prompt_tokens``, ``completion_tokens``)
and priced (``cost_usd``); cached answers count apart (``cached_prompt_tokens``, no cost). With a
``Budget`` no request is sent once the grid's spend reached it; in a dry run (``plan``) nothing
is sent at all: uncached requests are counted in the plan and answered as not sent.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from tabmem.errors import ProviderError, RetryPolicy, TransientProviderError
from tabmem.llm.base import Backend, FitRequest, Request, Response, capabilities_of
from tabmem.llm.batch import BatchAnswer, BatchClient, BatchJob
from tabmem.llm.budget import Budget
from tabmem.llm.cache import ResponseCache, cache_key, fit_key
from tabmem.llm.openai_http import reply_text, reported_usage
from tabmem.llm.plan import RequestPlan, prompt_tokens
from tabmem.llm.pricing import Price
from tabmem.llm.reasoning import Reasoning, finish, opens_with_thoughts, provider_params
from tabmem.llm.stopping import cut_at_stops

if TYPE_CHECKING:
    from tabmem.data import Dataset

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Answered:
    """One request with its response and the wall-clock window (ns) of the batch that sent it."""

    request: Request
    response: Response
    started_ns: int
    ended_ns: int


@dataclass
class CallStats:
    """How a batch of queries was answered: fresh calls, cache hits, retries, failures, and
    the tokens and dollars the provider reported for them."""

    model_calls: int = 0
    cache_hits: int = 0
    retries: int = 0
    failures: int = 0
    empty_answers: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    cached_completion_tokens: int = 0
    evaluated_tokens: int = 0
    reasoning_tokens: int = 0  # a reasoning model's thoughts, within completion_tokens
    provider_cached_prompt_tokens: int = 0  # served by the provider's prompt cache
    provider_cache_write_tokens: int = 0  # written to it (Anthropic bills them apart)
    cost_usd: float = 0.0
    unpriced_answers: int = 0
    uncounted_answers: int = 0  # fresh answers whose server reported no token counts
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, **counts: float) -> None:
        with self._lock:
            for name, value in counts.items():
                setattr(self, name, getattr(self, name) + value)

    def as_dict(self) -> dict[str, float]:
        return {
            "model_calls": self.model_calls,
            "cache_hits": self.cache_hits,
            "retries": self.retries,
            "failed_calls": self.failures,
            "empty_answers": self.empty_answers,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cached_prompt_tokens": self.cached_prompt_tokens,
            "cached_completion_tokens": self.cached_completion_tokens,
            "evaluated_tokens": self.evaluated_tokens,
            "reasoning_tokens": self.reasoning_tokens,
            "provider_cached_prompt_tokens": self.provider_cached_prompt_tokens,
            "provider_cache_write_tokens": self.provider_cache_write_tokens,
            "cost_usd": self.cost_usd,
            "unpriced_answers": self.unpriced_answers,
            "uncounted_answers": self.uncounted_answers,
        }

    def since(self, before: dict[str, float]) -> dict[str, float]:
        """The counts added since ``before`` (an earlier ``as_dict``): one test's share."""
        return {name: value - before[name] for name, value in self.as_dict().items()}

    def add_cached(self, usage: dict[str, int]) -> None:
        """One answer served without asking: its tokens count apart, at no cost."""
        self.add(
            cache_hits=1,
            cached_prompt_tokens=usage.get("prompt_tokens", 0),
            cached_completion_tokens=usage.get("completion_tokens", 0),
        )


class _Pause:
    """A model-wide "not before" time: a server's Retry-After holds back every worker."""

    def __init__(self) -> None:
        self._until = 0.0
        self._lock = threading.Lock()

    def hold(self, seconds: float) -> None:
        with self._lock:
            self._until = max(self._until, time.monotonic() + seconds)

    def wait(self) -> None:
        while (left := self._until - time.monotonic()) > 0:
            time.sleep(left)


class LanguageModel:
    """One model as the tests see it: ``run`` answers a list of requests in order.

    ``price`` turns reported usage into dollars (None: unknown); ``budget`` caps the spend of
    the grid; ``plan`` makes this a dry run that sends nothing and counts what it would send.
    """

    def __init__(
        self,
        backend: Backend,
        name: str,
        prompt_form: str = "chat",
        context_window: int = 4096,
        cache: ResponseCache | None = None,
        max_concurrency: int = 1,
        retry: RetryPolicy | None = None,
        show_progress: bool = True,
        price: Price | None = None,
        budget: Budget | None = None,
        plan: RequestPlan | None = None,
        reasoning: Reasoning | None = None,
        batch: BatchClient | None = None,
    ) -> None:
        self.backend = backend
        self.reasoning = reasoning or Reasoning()
        self.batch = batch
        self.name = name
        self.prompt_form = prompt_form
        self.context_window = context_window
        self.cache = cache
        self.max_concurrency = max(1, max_concurrency)
        self.retry = retry or RetryPolicy()
        self.show_progress = show_progress
        self.stats = CallStats()
        self._pause = _Pause()
        self._refused: str | None = None
        self.price = price
        self.budget = budget
        self.plan = plan
        self._planned: set[str] = set()
        self._plan_lock = threading.Lock()
        self.budget_stop: str | None = None
        # Every request ``run`` answered, in order, for the query traces; the runner clears it.
        self.answered: list[Answered] = []

    @property
    def _identity(self) -> dict[str, Any]:
        """What keys this model's answers in the cache: the backend's identity, and how the
        model reasons when it does (the provider is then asked differently)."""
        identity = self.backend.identity
        if self.reasoning.active:
            identity = {**identity, "reasoning": self.reasoning.as_dict()}
        return identity

    @property
    def endpoint(self) -> str:
        """Where this model's requests go ("" for models that run here)."""
        return str(self.backend.identity.get("endpoint", ""))

    def unknown_data_reason(self, dataset: Dataset) -> str:
        """Why this model cannot answer about ``dataset`` at all, whatever it is asked (a
        reference model that knows only the shipped files), or "" when it can."""
        check = getattr(self.backend, "unknown_data_reason", None)
        return str(check(dataset)) if callable(check) else ""

    def count_tokens(self, text: str) -> int:
        """Tokens as the backend counts them, else a cautious estimate of one per 3 characters."""
        counted = self.backend.count_tokens(text)
        return counted if counted is not None else len(text) // 3 + 1

    def tokenize(self, text: str) -> list[str] | None:
        """``text`` in the model's own tokens, or None for models that do not expose them."""
        return self.backend.tokenize(text)

    @property
    def capabilities(self) -> frozenset[str]:
        """What the model can do (``tabmem.llm.base.capabilities_of``): tests state what they
        need, and the runner decides once whether a test applies to the model."""
        return capabilities_of(self.backend)

    def fit(self, requests: Sequence[FitRequest]) -> list[Response]:
        """A statistical baseline's answers (capability ``fit``): the label it predicts for each
        request's test row, one fit per shared training set, test rows and seed, each fit kept
        in the response cache like an answer."""
        fits: dict[tuple[int, int, int], dict[str, Any]] = {}
        answers = []
        for request in requests:
            key = (id(request.train), id(request.test), request.seed)
            if key not in fits:
                fits[key] = self._fitted(request)
            fitted = fits[key]
            answers.append(
                Response(text=fitted["labels"][request.row], detail=dict(fitted["info"]))
            )
        return answers

    def _fitted(self, request: FitRequest) -> dict[str, Any]:
        """The fit a request shares with the others of its training set: from the cache, or
        fitted now and cached (labels for every test row, and what the fit chose)."""
        key = fit_key(self.backend.identity, request)
        if self.cache is not None:
            hit = self.cache.get_entry(key)
            if hit is not None:
                self.stats.add_cached(hit.usage)
                return json.loads(hit.text)
        fitted = self.backend.fit_predict(  # type: ignore[attr-defined]
            request.train, list(request.labels), request.test, dict(request.kinds), request.seed
        )
        stored = {"labels": fitted.labels, "info": fitted.info}
        text = json.dumps(stored, default=_plain)
        if self.cache is not None:
            self.cache.put(key, self.name, text)
        return json.loads(text)

    def logprobs(self, requests: Sequence, description: str = "log-probabilities") -> list | None:
        """Per-token log-probabilities of each ``ScoreRequest`` (cached), or None when the
        backend gives none; see ``tabmem.llm.logprobs``."""
        from tabmem.llm.logprobs import score_texts

        return score_texts(self, requests, description)

    def run(self, requests: Sequence[Request], description: str = "queries") -> list[Response]:
        """Answer every request; failures become responses with ``error`` set, never exceptions.

        Requests with equal cache keys are sent once; the copies count as cache hits.
        """
        if not requests:
            return []
        started = time.time_ns()
        keys = [cache_key(self._identity, r) for r in requests]
        unique = dict(zip(keys, requests, strict=True))
        with self._progress() as progress:
            task = progress.add_task(f"{self.name}: {description}", total=len(unique))

            def answer(item: tuple[str, Request]) -> Response:
                response = self._answer(*item)
                progress.advance(task)
                return response

            if self.batch is not None and self.plan is None:
                answers = self._batched(self.batch, unique, progress, task)
            elif self.max_concurrency == 1 or len(unique) == 1:
                answers = [answer(item) for item in unique.items()]
            else:
                workers = min(self.max_concurrency, len(unique))
                with ThreadPoolExecutor(max_workers=workers) as pool:
                    answers = list(pool.map(answer, unique.items()))
        by_key = dict(zip(unique, answers, strict=True))
        responses = self._expand(keys, by_key)
        ended = time.time_ns()
        pairs = zip(requests, responses, strict=True)
        self.answered += [Answered(q, a, started, ended) for q, a in pairs]
        return responses

    def _expand(self, keys: list[str], by_key: dict[str, Response]) -> list[Response]:
        """One response per request, in order; repeated keys get a cached copy."""
        seen: set[str] = set()
        out = []
        for key in keys:
            response = by_key[key]
            if key in seen:
                self.stats.add_cached(response.usage)
                response = replace(response, cached=True, usage=dict(response.usage))
            seen.add(key)
            out.append(response)
        return out

    def _progress(self) -> Progress:
        return Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            disable=not self.show_progress,
            transient=True,
        )

    def _answer(self, key: str, request: Request) -> Response:
        """The answer to one request; a reply that opens with thoughts from a model not known
        to reason makes it a reasoning model (once), and the request is asked again so. A
        request that was watched when it started and finished after another thread's reply
        made the model a reasoning one is asked again too: it may have been sent with the stop
        sequences and no room for thoughts, which a stop sequence can cut down to "<think>"."""
        watching = self.reasoning.detect and not self.reasoning.active
        response = self._answer_once(key, request)
        thought = self.reasoning.active or opens_with_thoughts(response.text)
        if watching and response.error is None and thought:
            self._reasons_after_all()
            return self._answer_once(cache_key(self._identity, request), request)
        return response

    def _reasons_after_all(self) -> None:
        """Treat the model as an inline reasoning model from now on, and say so once."""
        with self._plan_lock:
            if self.reasoning.active:
                return
            self.reasoning = self.reasoning.detected()
        _log.warning(
            "Model '%s' writes its thoughts before its answers (<think>…</think>): they are cut "
            "off before scoring and its requests now leave %d tokens for them; set "
            "'reasoning: inline' in its config to say so from the start.",
            self.name,
            self.reasoning.allowance,
        )

    def _answer_once(self, key: str, request: Request) -> Response:
        cached = self._from_cache(key, request)
        if cached is not None:
            return cached
        if self.plan is not None:
            return self._plan(self.plan, key, request)
        response = self._call_with_retries(request)
        if response.error is None:
            self._count_usage(response.usage)
            if self.cache is not None:
                self.cache.put(key, self.name, response.text, response.usage)
            response = self._finished(response, request)
            self.stats.add(empty_answers=int(response.text == ""))
        return response

    def _from_cache(self, key: str, request: Request) -> Response | None:
        """The cached answer to ``request`` (thoughts cut off, counted as a hit), or None."""
        hit = self.cache.get_entry(key) if self.cache is not None else None
        if hit is None:
            return None
        self.stats.add_cached(hit.usage)
        if self.plan is not None:
            self.plan.add_cached()
        answer = self._finished(Response(hit.text, True, usage=hit.usage), request)
        self.stats.add(empty_answers=int(answer.text == ""))
        return answer

    def _batched(
        self, batch: BatchClient, unique: dict[str, Request], progress: Progress, task: Any
    ) -> list[Response]:
        """Cached answers from the cache, the rest as one batch per endpoint (Batch API); each
        answer is cached as it is read back."""
        answers: dict[str, Response] = {}
        jobs: list[BatchJob] = []
        for key, request in unique.items():
            cached = self._from_cache(key, request)
            if cached is not None:
                answers[key] = cached
                progress.advance(task)
                continue
            sent = provider_params(request.params, self.reasoning)
            jobs.append(BatchJob(key, *self.backend.batch_job(request, sent)))  # type: ignore[attr-defined]
        stop = self.budget.reached() if self.budget is not None and jobs else None
        if stop:
            self.budget_stop = stop
            self.stats.add(failures=len(jobs))
            answers.update({j.custom_id: Response("", error=f"not sent: {stop}") for j in jobs})
            jobs = []
        if jobs:
            already = len(answers)
            read = batch.run(jobs, lambda done, _: progress.update(task, completed=already + done))
            self.stats.add(model_calls=len(jobs))
            for job in jobs:
                answers[job.custom_id] = self._batch_answer(job, read[job.custom_id], unique)
        return [answers[key] for key in unique]

    def _batch_answer(
        self, job: BatchJob, read: BatchAnswer, unique: dict[str, Request]
    ) -> Response:
        """One job's answer as a response: cached, counted and priced like a live one."""
        if read.body is None:
            self.stats.add(failures=1)
            return Response("", error=read.error or "no answer")
        request = unique[job.custom_id]
        sent = provider_params(request.params, self.reasoning)
        text = cut_at_stops(reply_text(job.kind, read.body), sent.stop)  # stops a batch left out
        text = sent.stop_rule.cut(text) if sent.stop_rule is not None else text
        usage = reported_usage(read.body.get("usage"))
        self._count_usage(usage)
        if self.cache is not None:
            self.cache.put(job.custom_id, self.name, text, usage)
        answer = self._finished(Response(text, usage=usage), request)
        self.stats.add(empty_answers=int(answer.text == ""))
        return answer

    def _finished(self, raw: Response, request: Request) -> Response:
        """A reasoning model's answer with its thoughts cut off; others as they are. The cache
        keeps the raw text, so the thoughts come back with a cached answer. Thoughts of a
        fresh answer whose provider reported no ``reasoning_tokens`` are counted here."""
        if not self.reasoning.active:
            return raw
        answer, thoughts = finish(raw.text, request.params)
        if not raw.cached and thoughts and "reasoning_tokens" not in raw.usage:
            self.stats.add(reasoning_tokens=self.count_tokens(thoughts))
        return Response(answer, raw.cached, None, raw.usage, raw.detail, thoughts)

    def _plan(self, plan: RequestPlan, key: str, request: Request) -> Response:
        """Dry run: count the request, once per model (an earlier test of the cell would have
        cached its answer), and answer that it was not sent."""
        with self._plan_lock:
            repeated = key in self._planned
            self._planned.add(key)
        if repeated:
            plan.add_cached()
        else:
            sent = provider_params(request.params, self.reasoning)
            tokens = prompt_tokens(self.backend, request)
            plan.add(tokens, sent.max_tokens, self.reasoning.allowance)
        return Response(text="", error="not sent: dry run")

    def _count_usage(self, usage: dict[str, int]) -> None:
        """Add a fresh answer's reported tokens and their cost (to the grid's budget too)."""
        prompt, completion = usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)
        counted = "prompt_tokens" in usage or "completion_tokens" in usage
        self.stats.add(
            uncounted_answers=int(not counted),
            prompt_tokens=prompt,
            completion_tokens=completion,
            evaluated_tokens=usage.get("evaluated_tokens", 0),
            reasoning_tokens=usage.get("reasoning_tokens", 0),
            provider_cached_prompt_tokens=usage.get("cache_read_tokens", 0),
            provider_cache_write_tokens=usage.get("cache_write_tokens", 0),
        )
        if self.price is None:
            self.stats.add(unpriced_answers=1)
            return
        cached = usage.get("cache_read_tokens", 0), usage.get("cache_write_tokens", 0)
        cost = self.price.cost(prompt, completion, *cached)
        self.stats.add(cost_usd=cost)
        if self.budget is not None and cost:
            self.budget.add(cost)

    def _call_with_retries(self, request: Request) -> Response:
        def once() -> Response:
            self._pause.wait()
            if self._refused is not None:
                return Response(text="", error=f"not sent: {self._refused}")
            if self.budget is not None and (stop := self.budget.reached()):
                self.budget_stop = stop
                return Response(text="", error=f"not sent: {stop}")
            self.stats.add(model_calls=1)
            return Response(text=self._call(request) or "", usage=self._reported_usage())

        def retrying(exc: TransientProviderError) -> None:
            self.stats.add(retries=1)
            if exc.retry_after:
                self._pause.hold(exc.retry_after)

        try:
            response = self.retry.run(once, retrying)
        except TransientProviderError as exc:
            response = Response(
                text="", error=f"gave up after {self.retry.max_retries + 1} tries: {exc}"
            )
        except ProviderError as exc:
            self._refused = str(exc)
            response = Response(text="", error=str(exc))
        except Exception as exc:
            response = Response(text="", error=f"{type(exc).__name__}: {exc}")
        if response.error:
            self.stats.add(failures=1)
        return response

    def _reported_usage(self) -> dict[str, int]:
        """The usage the backend reported for this thread's last answer, if it reports any."""
        take = getattr(self.backend, "take_usage", None)
        return dict(take()) if callable(take) else {}

    def _call(self, request: Request) -> str:
        """The backend's answer, cut where its score is settled when the request has a stop
        rule (backends that cannot stop early still answer the same text)."""
        params = provider_params(request.params, self.reasoning)
        if request.messages is not None:
            text = self.backend.chat(list(request.messages), params)
        else:
            text = self.backend.complete(request.prompt or "", params)
        rule = params.stop_rule
        return rule.cut(text or "") if rule is not None else text

    def close(self) -> None:
        self.backend.close()
        if self.batch is not None:
            self.batch.close()


def _plain(value: Any) -> Any:
    """A numpy number in a fit's info as the Python number JSON writes."""
    return value.item()
