"""The adversary panel: reference models that know a file's distribution in ways no data-only
baseline does, and never a row they are asked about.

A null is only as good as the strongest model that never saw the rows and still cannot beat
it. The learner and the copula learner are the baselines' own predictors, so they sit at the
null by construction; these three families were not, and each is built to beat some test
(where one did, the test's baseline took it in: the choice probes now score their options by
the boosted family's models too):

- ``oracle-moments``: each class of the hub column (the category that tells most about the
  others, as the data's copulas choose it: iris' species) as a multivariate normal of the
  measurements, and each other category's frequencies per class. It stores means,
  covariances and frequencies, no row. At a small spread it writes near each class's
  middle, where a coarse-valued file's rows crowd.
- ``oracle-mixture``: the same reading with latent classes, a Gaussian mixture over the
  measurements (the number of components chosen by BIC), categories per component: a
  density model of the file that finds groups no column names.
- ``oracle-boosted``: per asked column, a gradient-boosted model of it given the columns the
  prompt shows (scikit-learn's histogram boosting), its residual spread for measurements.

Every family is cross-fitted (``tabmem.stats.crossfit``): the fit that answers never
held the asked row, and the asked rows' values are never written. An answer is a value of
the file's own column, in its spelling: a measurement is the value of the nearest row to the
model's number, a category the model's most likely value (or a draw) among the rows allowed.
The models are in ``tabmem.stats.panel_models``, where the choice probes' baselines use the
boosted one too.

``spread`` scales every draw: 1 draws at the model's own spread, 0.25 at a quarter of it, 0
writes the conditional middle (the most likely category) every time. Questions at
temperature 0 and the first CSV row are answered at the middle whatever the spread, as the
learner answers them; observations and later rows are draws.
"""

from __future__ import annotations

import random
import zlib
from abc import abstractmethod
from collections.abc import Collection, Mapping, Sequence

import numpy as np

from tabmem.data.dataset import Dataset
from tabmem.kept import Kept
from tabmem.llm.oracle.learner import ConditionalModel, LearnerOracle, _Knowledge
from tabmem.llm.oracle.models import _RowRequest, _Table
from tabmem.stats.panel_models import BoostedModel, ComponentModel


class _AtSpread:
    """A panel model read at one spread: the ``ConditionalModel`` the learner asks."""

    def __init__(self, model: ComponentModel | BoostedModel, spread: float) -> None:
        self.model, self.spread = model, spread

    def pick(
        self,
        target: int,
        given: Mapping[int, str],
        rng: random.Random | None = None,
        exclude: Collection[int] = (),
        protect: bool = True,
        among: np.ndarray | None = None,
    ) -> int | None:
        return self.model.answer(target, given, self.spread, rng, exclude, protect, among)

    def choice_scores(
        self,
        options: Sequence[Mapping[int, str]],
        scored: Sequence[Collection[int]],
        exclude: Collection[int] = (),
    ) -> list[float]:
        return self.model.choice_scores(options, scored, exclude)

    def record(self, rng: random.Random, asked: Collection[int]) -> list[int] | None:
        """A whole record drawn jointly where the family can (None: column by column)."""
        if isinstance(self.model, ComponentModel):
            return self.model.record(self.spread, rng, asked)
        return None


KEPT_MODELS = 8
"""Files whose fits a process keeps per family: every spread of a family shares them."""
_MODELS: Kept[ComponentModel | BoostedModel] = Kept(KEPT_MODELS * 3)


class PanelOracle(LearnerOracle):
    """A family of the panel at a spread: the learner's formats with the family's model."""

    def __init__(self, datasets: Sequence[Dataset], spread: float = 1.0) -> None:
        if not 0.0 <= spread <= 4.0:
            raise ValueError(f"a spread must be between 0 and 4, not {spread}")
        super().__init__(datasets)
        self.spread = spread

    @abstractmethod
    def _build(self, table: _Table) -> ComponentModel | BoostedModel:
        """The family's model of ``table`` (each family builds its own)."""

    def _row(self, known: _Knowledge, request: _RowRequest) -> list[str]:
        """A drawn row with nothing fixed is drawn as a whole where the family can (a class
        and its values together); any other row column by column, as the learner writes it."""
        record = None
        if request.draw is not None and not request.fixed and request.typed is None:
            assert isinstance(known.model, _AtSpread)
            record = known.model.record(request.draw, request.asked)
        if record is None:
            return super()._row(known, request)
        out = [str(known.raw_texts[j][row]) for j, row in enumerate(record)]
        for j, count in request.counts.items():
            out[j] = str(count)
        return out

    def _model(self, table: _Table) -> ConditionalModel:
        """The family's cross-fitted model of the file, shared by every spread in the process."""
        key = (self.model_name, table.dataset.name, zlib.crc32(table.text.encode()))
        return _AtSpread(_MODELS.get(key, lambda: self._build(table)), self.spread)


class MomentsOracle(PanelOracle):
    """Class-conditional means and covariances of the measurements, category frequencies."""

    model_name = "oracle-moments"

    def _build(self, table: _Table) -> ComponentModel:
        return ComponentModel(table.clean_rows, table.dataset.name, latent=False)


class MixtureOracle(PanelOracle):
    """A Gaussian mixture over the measurements, categories per component."""

    model_name = "oracle-mixture"

    def _build(self, table: _Table) -> ComponentModel:
        return ComponentModel(table.clean_rows, table.dataset.name, latent=True)


class BoostedOracle(PanelOracle):
    """Gradient-boosted models of each column given the others."""

    model_name = "oracle-boosted"

    def _build(self, table: _Table) -> BoostedModel:
        return BoostedModel(table.clean_rows, table.dataset.name)
