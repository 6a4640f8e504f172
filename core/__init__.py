"""blobviewer core: keep large tool outputs out of an LLM agent's context.

Framework-free: nothing in this package imports Django or reads settings; callers
pass paths and policies in as arguments. Import from the modules themselves
(`core.store`, `core.promotion`, `core.summary`, `core.agent`…): importing the package
imports nothing else, so a small module (`core.agent.policy`, say) comes without the
store and asyncio.
"""
