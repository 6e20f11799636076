"""What the project still answers to under an old name, and the release that removes it.

A module that warns with DeprecationWarning is listed here; the template's suite fails
once the release named is made, so the old name goes with that release.
"""

# old import path -> (the new import path, the release that removes the old one)
DEPRECATED: dict[str, tuple[str, str]] = {}
