import json
import logging
import re
import unittest

import manent_plugin as mp
from manent_plugin.log import HclogFormatter, level_name


def record(level, msg, *args, **extra):
    log = logging.getLogger("manent_plugin.tests")
    r = log.makeRecord(log.name, level, __file__, 1, msg, args, None, extra=extra or None)
    return json.loads(HclogFormatter("myplugin").format(r))


class HclogTest(unittest.TestCase):
    def test_reserved_keys_are_strings_and_the_timestamp_has_six_fractional_digits(self):
        line = record(logging.INFO, "deployed %s", "t1")
        self.assertEqual(line["@level"], "info")
        self.assertEqual(line["@message"], "deployed t1")
        self.assertEqual(line["@module"], "myplugin")
        self.assertRegex(line["@timestamp"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
        for key in ("@level", "@message", "@module", "@timestamp"):
            self.assertIsInstance(line[key], str)

    def test_levels(self):
        self.assertEqual([level_name(n) for n in (mp.TRACE, 10, 20, 30, 40, 50)],
                         ["trace", "debug", "info", "warn", "error", "error"])

    def test_extras_are_top_level_json_values(self):
        line = record(logging.WARNING, "x", n=2, target="t1", ok=True)
        self.assertEqual((line["n"], line["target"], line["ok"]), (2, "t1", True))
        self.assertNotIn("args", line)
        self.assertNotIn("levelname", line)

    def test_a_message_is_always_a_string(self):
        self.assertEqual(record(logging.INFO, 5)["@message"], "5")

    def test_an_exception_carries_its_traceback(self):
        log = logging.getLogger("manent_plugin.tests")
        try:
            raise ValueError("boom")
        except ValueError:
            import sys
            r = log.makeRecord(log.name, logging.ERROR, __file__, 1, "failed", (), sys.exc_info())
        line = json.loads(HclogFormatter("m").format(r))
        self.assertIn("ValueError: boom", line["stacktrace"])
        self.assertNotIn("\n", HclogFormatter("m").format(r))

    def test_the_logger_has_trace_and_is_a_singleton(self):
        log = mp.logger()
        self.assertIs(log, mp.logger())
        self.assertTrue(log.isEnabledFor(mp.TRACE))
        self.assertTrue(callable(getattr(log, "trace")))
        self.assertTrue(re.match(r"^[^\n]*$", HclogFormatter("m").format(
            log.makeRecord(log.name, mp.TRACE, __file__, 1, "a", (), None))))


if __name__ == "__main__":
    unittest.main()
