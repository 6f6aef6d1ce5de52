"""What-if: samples/s and accelerator utilisation for another step time, from one run's per-batch stages.

Per batch a run measured: waiting for the loader (w), host-to-device (h), the step (s) and the rest of
the loop (o, the epoch's time not in any stage). A loader that reads in the training process
(no workers, no prefetch thread) adds its time to every batch: the period is w + h + s' + o. For a
loader that reads alongside (DataLoader workers, a prefetch thread, Ray actors) one run cannot tell
what its wait was: the workers' pace (the period would stay max(P, h + s' + o), P the run's own
period) or the main process receiving each batch from a worker, a serial cost like the synchronous
case (w + h + s' + o). The prediction is the range between the two. Measured here with 2 workers and
sleep:5, the wait was mostly the second kind: a single-figure model that assumed the first was off by
-37% at sleep:2.5.
The model is validated by measuring: `iobench run --what-if` runs the configuration again with the
predicted step and reports the error next to every prediction.
"""

from __future__ import annotations

from dataclasses import dataclass

from iobench.judge.bounds import largest_stage, paced_bound
from iobench.loaders import kind_of
from iobench.results.record import RunRecord


@dataclass(frozen=True)
class Prediction:
    step_ms: float
    samples_per_s_low: float  # equal to high when the loader's speed is known
    samples_per_s_high: float
    utilisation_low: float
    utilisation_high: float
    bound: str  # the stage that sets the period: loader, host-to-device or step

    @property
    def samples_per_s(self) -> float:
        """The middle of the range (the prediction when it is a single figure)."""
        return (self.samples_per_s_low + self.samples_per_s_high) / 2


def asynchronous(r: RunRecord) -> bool:
    """True when batches are read alongside the step (workers, a prefetch thread, Ray actors)."""
    c = r.config
    kind = kind_of(c.loader)
    return c.settings.num_workers > 0 or c.settings.prefetch_thread > 0 or (kind is not None and kind.reads_beside_step)


def predict(r: RunRecord, step_ms: float) -> Prediction:
    e = r.epochs
    batches = max(1, e.batches_per_epoch)
    batch = e.samples_per_epoch / batches
    period = 1000 * e.epoch_seconds_median / batches
    w, h, s = e.wait_ms_per_batch, e.h2d_ms_per_batch, e.step_ms_per_batch
    rest = max(0.0, period - w - h - s)
    step = step_ms + _sleep_overshoot(r)
    compute = h + step + rest
    if not asynchronous(r):
        new = w + compute
        largest = largest_stage({"loader": w, "host-to-device": h, "step": step})
        return _prediction(step_ms, batch, new, new, largest[0] if largest is not None else "loader")
    paced, serial = max(period, compute), w + compute
    slow, fast = max(paced, serial), min(paced, serial)
    device = "host-to-device" if h > step else "step"
    return _prediction(step_ms, batch, slow, fast, paced_bound(device, w, period, compute, slow, fast))


def _sleep_overshoot(r: RunRecord) -> float:
    """How much longer than asked a sleep step took per batch (the timer's granularity); 0 otherwise."""
    if not r.config.step.startswith("sleep:"):
        return 0.0
    asked = float(r.config.step.split(":")[1])
    return max(0.0, r.epochs.step_ms_per_batch - asked)


def _prediction(step_ms: float, batch: float, slow_ms: float, fast_ms: float, bound: str) -> Prediction:
    return Prediction(
        step_ms=step_ms,
        samples_per_s_low=1000 * batch / slow_ms,
        samples_per_s_high=1000 * batch / fast_ms,
        utilisation_low=step_ms / slow_ms,
        utilisation_high=step_ms / fast_ms,
        bound=bound,
    )


def error(prediction: Prediction, measured: RunRecord) -> float:
    """Relative error of the prediction against a run measured with that step (0 inside the range)."""
    m = measured.epochs.samples_per_s
    if prediction.samples_per_s_low <= m <= prediction.samples_per_s_high:
        return 0.0
    nearest = min((prediction.samples_per_s_low, prediction.samples_per_s_high), key=lambda p: abs(p - m))
    return nearest / m - 1
