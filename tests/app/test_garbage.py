import gc

from app.garbage import GC_THRESHOLDS, worker_garbage_collector


def test_the_worker_settings_hold_inside_and_the_previous_ones_come_back() -> None:
    before = gc.get_threshold()
    assert before != GC_THRESHOLDS  # the test would prove nothing otherwise
    with worker_garbage_collector():
        assert gc.get_threshold() == GC_THRESHOLDS
        assert gc.get_freeze_count() > 0  # the heap so far is out of the collector's reach
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
