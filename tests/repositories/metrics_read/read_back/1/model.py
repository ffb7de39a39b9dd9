"""Creates metrics and reads the server's /metrics from inside execute after each, as Triton's own
qa/python_models/custom_metrics does: MISSED = JSON list of the lines that were not there yet. The request parameter
`metrics_url` says where /metrics is, `count` how many metrics to create (a new label value each time, so each is a
new metric); `kind` "counter" (its zero line) or "histogram" (its `_count` zero line)."""

import json
import urllib.request

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        family = pb_utils.MetricFamily
        self.families = {"counter": family("read_back_total", "created, then read back", family.COUNTER),
                         "histogram": family("read_back_seconds", "created, then read back", family.HISTOGRAM)}
        self.metrics = []  # (kept: a dropped Metric leaves /metrics)
        self.created = 0

    def execute(self, requests):
        responses = []
        for request in requests:
            asked = json.loads(request.parameters())
            kind = asked.get("kind", "counter")
            missed = []
            for _ in range(int(asked["count"])):
                self.created += 1
                labels = {"n": str(self.created)}
                if kind == "histogram":
                    self.metrics.append(self.families[kind].Metric(labels=labels, buckets=[1.0]))
                    line = f'read_back_seconds_count{{n="{self.created}"}} 0'
                else:
                    self.metrics.append(self.families[kind].Metric(labels=labels))
                    line = f'read_back_total{{n="{self.created}"}} 0'
                with urllib.request.urlopen(asked["metrics_url"]) as answer:
                    if line not in answer.read().decode():
                        missed.append(line)
            report = np.array([json.dumps(missed).encode()], dtype=np.object_)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("MISSED", report)]))
        return responses
