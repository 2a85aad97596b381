"""An out-of-memory seen coming: a GPU's memory tracked per phase, and the projection of its
next event."""

from governor.domain.memory_outlook import MemoryTrack, observe, project
from governor.domain.model import Phase

GIB = 1024**3
CARD = 80 * GIB


def growing(steps: int, every: int = 4, jump_gib: int = 6) -> MemoryTrack:
    """Training that grows 2 GiB a step from 50 GiB, with an eval every `every` steps that
    adds `jump_gib` over the training level."""
    track = None
    for step in range(1, steps + 1):
        track = observe(track, (50 + 2 * step) * GIB, CARD, Phase.TRAINING, step)
        if step % every == 0:
            track = observe(track, (50 + 2 * step + jump_gib) * GIB, CARD, Phase.EVALUATION, step)
            track = observe(track, (50 + 2 * step) * GIB, CARD, Phase.TRAINING, step)
    assert track is not None
    return track


def test_a_track_keeps_each_phases_peak_its_growth_per_step_and_its_largest_jump() -> None:
    track = growing(8)
    assert track.peaks == {"training": 66 * GIB, "evaluation": 72 * GIB}
    assert track.growth_per_step == 2 * GIB
    assert (track.jump, track.jump_at) == (6 * GIB, "evaluation")
    assert (track.event_step, track.event_every) == (8, 4)
    assert MemoryTrack.from_json(track.as_json()) == track


def test_the_next_eval_is_projected_from_the_level_its_growth_and_the_jump() -> None:
    seen = project("GPU-0", growing(8), steps_to_save=None)
    # 66 GiB at step 8, + 2 GiB x 4 steps to the eval at 12, + its 6 GiB jump: 80 GiB
    assert (seen.level, seen.steps_ahead, seen.projected) == (66 * GIB, 4, 80 * GIB)
    assert seen.crosses
    nearer = project("GPU-0", growing(11), steps_to_save=None)  # 72 + 2 x 1 + 6 = 80 GiB
    assert (nearer.steps_ahead, nearer.projected, nearer.crosses) == (1, 80 * GIB, True)
    first = project("GPU-0", growing(7), steps_to_save=None)  # one eval: no interval yet
    assert (first.steps_ahead, first.projected, first.crosses) == (0, 70 * GIB, False)


def test_without_an_interval_of_its_own_the_horizon_is_the_time_to_save() -> None:
    track = None
    for step in range(1, 11):
        track = observe(track, (50 + step) * GIB, CARD, None, step)
    assert track is not None and track.event_every is None and track.jump == 0
    assert project("GPU-0", track, steps_to_save=None).projected == 60 * GIB
    assert project("GPU-0", track, steps_to_save=19.2).projected == 80 * GIB  # 20 steps ahead


def test_a_long_sample_is_a_jump_over_the_level_and_its_growth() -> None:
    track = None
    for step, used in enumerate((50, 52, 54, 56, 65, 58), start=1):
        track = observe(track, used * GIB, CARD, Phase.TRAINING, step)
    assert track is not None
    assert (track.jump, track.jump_at) == (7 * GIB, "sample")  # 65 where 58 was due
    assert track.peaks["training"] == 65 * GIB


def test_loading_and_export_are_not_the_training_loops_memory() -> None:
    track = observe(None, 10 * GIB, CARD, Phase.LOADING, 0)
    track = observe(track, 40 * GIB, CARD, Phase.EXPORT, 0)
    assert track.peaks == {"loading": 10 * GIB, "export": 40 * GIB}
    assert (track.level, track.growth_per_step, track.jump) == (10 * GIB, 0.0, 0)
