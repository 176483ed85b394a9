import asyncio
import logging
import types
import unittest

from manent_plugin import Permanent

import plugin


class PluginTest(unittest.TestCase):
    def test_deploy_is_not_implemented_yet(self):
        d = plugin.factory({}, logging.getLogger("test"))
        req = types.SimpleNamespace(application="a", targets=[], params={})
        with self.assertRaises(Permanent):
            asyncio.run(d.deploy(req))


if __name__ == "__main__":
    unittest.main()
