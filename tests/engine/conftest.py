import pytest

from tests.engine.reference import ReferenceModel


@pytest.fixture(scope="session")
def reference(tiny_model_dir):
    return ReferenceModel(tiny_model_dir)
