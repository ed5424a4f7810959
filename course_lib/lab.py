"""JupyterLab for the course (`make lab`): the solved lessons in notebooks/ open read-only.

A learner works in exercises/; notebooks/ holds the solved lessons, which a run of one (or
its autosave) must not change. Jupyter's contents manager here reports every file under
notebooks/ as not writable, so JupyterLab opens it read-only and never autosaves it, and
refuses a save, a rename or a delete there with a message that says where to work. File
permissions cannot do this for a learner who is root (a container), whom they do not bind.

    python -m jupyterlab --ServerApp.contents_manager_class=course_lib.lab.CourseContents
"""
from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager
from tornado import web

SOLVED = "notebooks"    # the folder, under Jupyter's root, of the solved lessons


def solved(path):
    """Whether a Jupyter API path (relative to the root, '/'-separated) is in notebooks/ or is it."""
    parts = [p for p in str(path).replace("\\", "/").split("/") if p not in ("", ".")]
    return bool(parts) and parts[0] == SOLVED


def _refuse(path):
    raise web.HTTPError(403, f"{path} is a solved lesson, kept read-only so that running it changes "
                             f"nothing; work in your own copy, exercises/ (File > Save As... keeps "
                             f"a copy of this one elsewhere)")


class CourseContents(AsyncLargeFileManager):
    """Jupyter's own contents manager, with notebooks/ read-only."""

    async def get(self, path, content=True, type=None, format=None, require_hash=False):
        model = await super().get(path, content=content, type=type, format=format,
                                  require_hash=require_hash)
        if solved(path):
            model["writable"] = False
        listed = model.get("content") if model.get("type") == "directory" else None
        for item in listed or []:
            if solved(item.get("path", "")):
                item["writable"] = False
        return model

    async def save(self, model, path=""):
        if solved(path):
            _refuse(path)
        return await super().save(model, path)

    async def rename_file(self, old_path, new_path):
        if solved(old_path) or solved(new_path):
            _refuse(old_path if solved(old_path) else new_path)
        return await super().rename_file(old_path, new_path)

    async def delete_file(self, path):
        if solved(path):
            _refuse(path)
        return await super().delete_file(path)
