"""Custom metrics per request: a counter of requests and one of elements, a gauge of the last input's sum and a
histogram of the input values; answers with the request counter and the gauge as the server holds them (value()).

A request parameter `misuse` makes the model misuse the API instead; the error goes back as the response's error.
"""

import json

import numpy as np
import triton_python_backend_utils as pb_utils

LABELS = {"model": "metered", "unit": "requests"}


def misuse(self, what):
    family = pb_utils.MetricFamily
    if what == "negative_increment":
        self.requests.increment(-1)
    elif what == "set_counter":
        self.requests.set(3)
    elif what == "observe_gauge":
        self.last_sum.observe(1.0)
    elif what == "increment_histogram":
        self.values.increment(1)
    elif what == "value_histogram":
        self.values.value()
    elif what == "kind_clash":
        family("metered_requests_total", "Requests seen by metered", family.GAUGE)
    elif what == "server_name":  # the server's own family: its samples would be forged, /metrics unparsable
        forged = family("nv_inference_count", "forged", family.COUNTER)
        forged.Metric(labels={"model": "metered", "version": "1"}).increment(1000)
    elif what == "bad_name":
        family("0metered", "a name may not start with a digit", family.COUNTER)
    elif what == "bad_label":
        self.request_family.Metric(labels={"bad-label": "x"})
    elif what == "labels_not_dict":
        self.request_family.Metric(labels=["model"])
    elif what == "missing_buckets":
        self.value_family.Metric(labels={})
    elif what == "unexpected_buckets":
        self.request_family.Metric(labels={}, buckets=[1.0])
    elif what == "unsorted_buckets":
        self.value_family.Metric(labels={"other": "1"}, buckets=[2.0, 1.0])
    else:
        raise ValueError(f"unknown misuse {what!r}")


class TritonPythonModel:
    def initialize(self, args):
        family = pb_utils.MetricFamily
        self.request_family = family("metered_requests_total", "Requests seen by metered", family.COUNTER)
        self.requests = self.request_family.Metric(labels=LABELS)
        # (a family must outlive its metrics: as in Triton, dropping it invalidates them)
        self.element_family = family("metered_elements_total", "Input elements seen by metered", family.COUNTER)
        self.elements = self.element_family.Metric(labels={"model": "metered"})
        self.sum_family = family("metered_last_sum", "Sum of the last input of metered", family.GAUGE)
        self.last_sum = self.sum_family.Metric(labels={"model": "metered"})
        self.value_family = family("metered_values", "Input values of metered", family.HISTOGRAM)
        self.values = self.value_family.Metric(labels={"model": "metered"}, buckets=[1.0, 2.5, 10.0])

    def execute(self, requests):
        responses = []
        for request in requests:
            what = json.loads(request.parameters()).get("misuse")
            if what:
                try:
                    misuse(self, what)
                except pb_utils.TritonModelException as exc:
                    responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError(str(exc))))
                    continue
                responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError(f"{what}: no error raised")))
                continue
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            self.requests.increment(1)
            self.elements.increment(x.size)
            self.last_sum.set(0.0)  # (set, then increment: the gauge ends at the sum)
            self.last_sum.increment(float(x.sum()))
            for value in x:
                self.values.observe(float(value))
            responses.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("Y", x * 2),
                pb_utils.Tensor("REQUESTS", np.array([self.requests.value()], np.float64)),
                pb_utils.Tensor("LAST_SUM", np.array([self.last_sum.value()], np.float64)),
            ]))
        return responses
