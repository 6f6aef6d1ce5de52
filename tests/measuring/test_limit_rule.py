"""The limit rule (`iobench.measuring.limit_rule`): which ceiling a record is held to, read from its stored
choices."""

from __future__ import annotations


def test_the_limit_rule_reads_the_stored_spellings_of_the_choices():
    """The ceiling rule reads stored strings through RecordedConfig's cold/shuffled, and asks the loader whether it
    holds the dataset in device memory; a renamed choice would silently change which ceiling applies."""
    from iobench.loaders import LOADERS, LoaderName
    from iobench.loaders.base import ReadMethod
    from iobench.measuring.limit_rule import device_resident
    from iobench.plan.config import Cache, Order
    from iobench.results import record
    from tests.conftest import record_of

    assert record.STORED_THREADS_READ == ReadMethod.THREADS.value  # what a warning reads
    assert record.STORED_COLD == Cache.COLD.value
    assert record.STORED_SHUFFLE == Order.SHUFFLE.value
    resident = [n.value for n, k in LOADERS.items() if k.in_device_memory]
    assert resident and all(device_resident(record_of(loader=n)) for n in resident)
    assert not device_resident(record_of(loader=LoaderName.DATALOADER.value))
