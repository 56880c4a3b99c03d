"""obstore's native module, `obstore._obstore` (the store classes, the calls, the exceptions), loaded on its own.

obstore's Python package wraps that module in typed classes and imports `typing` (with `re`, `enum` and more
behind it) to annotate them: 5 to 7 ms of every `stado submit` to a cloud store, for nothing stado calls. stado
calls the module's functions with the module's own store classes, so the extension file is loaded alone, as the
import system would load it (found in the package's directory, by the interpreter's extension suffixes). Any other
layout of the package falls back to the ordinary import. A later `import obstore` finds the module loaded and wraps
it as usual.
"""
import sys

NAME = "obstore._obstore"


def obstore():
    """The native module, loaded once."""
    loaded = sys.modules.get(NAME)
    if loaded is not None:
        return loaded
    try:
        return _load_alone()
    except ImportError:
        from obstore import _obstore

        return _obstore


def _load_alone():
    import os
    from importlib.machinery import EXTENSION_SUFFIXES, ExtensionFileLoader, ModuleSpec, PathFinder

    package = PathFinder.find_spec("obstore")
    for where in (package.submodule_search_locations or []) if package is not None else []:
        for suffix in EXTENSION_SUFFIXES:
            path = os.path.join(where, "_obstore" + suffix)
            if not os.path.isfile(path):
                continue
            loader = ExtensionFileLoader(NAME, path)
            spec = ModuleSpec(NAME, loader, origin=path)
            module = loader.create_module(spec)
            module.__spec__, module.__loader__ = spec, loader
            sys.modules[NAME] = module
            try:
                loader.exec_module(module)
            except BaseException:
                del sys.modules[NAME]
                raise
            return module
    raise ImportError("obstore's native module is not where its package keeps it")
