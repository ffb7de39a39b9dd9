"""TritonContext, ModelConfigDict, the model config lookup and @triton_context. No server needed."""

from __future__ import annotations

import pytest

from pytriton.decorators import (
    TRITON_CONTEXT_FIELD_NAME,
    ModelConfigDict,
    TritonContext,
    batch,
    first_value,
    get_model_config,
    get_triton_context,
    triton_context,
)
from pytriton.exceptions import PyTritonValidationError
from tests.decorators.helpers import (
    _config,
    _inject,
)


class _CallableClass:
    def __call__(self, requests):
        return requests

    def method(self, requests):
        return requests


def test_model_config_dict_functions_and_objects():
    def fn():
        pass

    def fn2():
        pass

    inst, inst2 = _CallableClass(), _CallableClass()
    configs = ModelConfigDict()
    cfg_fn, cfg_fn2, cfg_inst, cfg_inst2 = (_config() for _ in range(4))
    configs[fn] = cfg_fn
    configs[fn2] = cfg_fn2
    configs[inst] = cfg_inst
    configs[inst2] = cfg_inst2

    assert configs[fn] is cfg_fn and configs[fn2] is cfg_fn2
    assert configs[inst] is cfg_inst and configs[inst2] is cfg_inst2
    assert configs[inst.__call__] is cfg_inst  # bound __call__ identifies its object
    assert len(configs) == 4
    assert set(configs.keys()) == {fn, fn2, inst, inst2}
    assert set(iter(configs)) == {fn, fn2, inst, inst2}
    assert fn in configs and _CallableClass() not in configs

    assert "ModelConfigDict(" in repr(configs)
    del configs[fn]
    assert len(configs) == 3 and fn not in configs and set(configs) == {fn2, inst, inst2}
    with pytest.raises(KeyError):
        configs[fn]


def test_model_config_dict_bound_methods_of_same_object_are_equal():
    inst, inst2 = _CallableClass(), _CallableClass()
    configs = ModelConfigDict()
    cfg, cfg2 = _config(), _config()
    configs[inst.method] = cfg
    configs[inst2.method] = cfg2
    assert inst.method is not inst.method  # a new bound method object on every access
    assert configs[inst.method] is cfg
    assert configs[inst2.method] is cfg2
    assert len(configs) == 2
    configs[inst.method] = cfg2  # re-setting the same callable does not add a key
    assert len(configs) == 2 and len(list(configs)) == 2
    assert configs[inst.method] is cfg2


def test_model_config_dict_objects_with_equal_repr_are_distinct():
    class Model:
        def __repr__(self):
            return "Model()"

        def __call__(self, requests):
            return requests

    m1, m2 = Model(), Model()
    configs = ModelConfigDict()
    configs[m1] = c1 = _config()
    configs[m2] = c2 = _config()
    assert configs[m1] is c1 and configs[m2] is c2


def test_model_config_dict_sees_through_wrapt_wrappers():
    def raw(requests):
        return requests

    decorated = batch(raw)
    configs = ModelConfigDict()
    configs[decorated] = cfg = _config()
    assert configs[raw] is cfg

    class Holder:
        @batch
        @first_value("a")
        def infer(self, **inputs):
            return inputs

    holder = Holder()
    configs[holder.infer] = cfg2 = _config()
    assert configs[holder.infer] is cfg2
    assert configs[holder.infer.__wrapped__] is cfg2  # the inner bound wrapper


def test_get_triton_context_and_model_config_for_function():
    def fn(requests):
        return requests

    cfg = _config()
    context = _inject(cfg, fn)
    assert get_triton_context(fn, None) is context
    assert get_model_config(fn, None) is cfg


def test_get_triton_context_missing_raises():
    def fn(requests):
        return requests

    with pytest.raises(PyTritonValidationError, match="must bound with triton to get  __triton_context__"):
        get_triton_context(fn, None)
    with pytest.raises(PyTritonValidationError):
        get_model_config(fn, None)


def test_get_model_config_not_registered_raises_key_error():
    def fn(requests):
        return requests

    fn.__triton_context__ = TritonContext()
    with pytest.raises(KeyError):
        get_model_config(fn, None)
    with pytest.raises(PyTritonValidationError, match="No model config"):
        get_model_config(fn, None)


def test_triton_context_function():
    @triton_context
    def fn(requests, **kwargs):
        return kwargs[TRITON_CONTEXT_FIELD_NAME]

    cfg = _config()
    context = _inject(cfg, fn)
    got = fn([])
    assert got is context
    assert got.model_configs[fn] is cfg


def test_triton_context_bound_method_and_callable_object():
    class Model:
        @triton_context
        def infer(self, requests, triton_context):
            return triton_context.model_configs[self.infer]

        @triton_context
        def __call__(self, requests, triton_context):
            return triton_context.model_configs[self]

    model = Model()
    cfg = _config()
    _inject(cfg, model.infer)
    assert model.__triton_context__.model_configs[model.infer] is cfg
    assert model.infer([]) is cfg

    callable_model = Model()
    cfg2 = _config()
    _inject(cfg2, callable_model)
    assert callable_model([]) is cfg2


def test_triton_context_not_bound():
    @triton_context
    def fn(requests, **kwargs):
        return kwargs

    with pytest.raises(PyTritonValidationError, match="__triton_context__"):
        fn([])
