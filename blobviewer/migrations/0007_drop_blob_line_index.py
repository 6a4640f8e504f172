"""Blob.line_index goes: a blob's line offsets and JSON spans now live beside it
in the store's `.index/` (core.store.index), made when it is stored or first read, and a big
JSON blob's rendering keeps its own in `derived/.index/`. Nothing is copied: the old
offsets were a cache, and the first reading of an old blob makes its index again.

Numbered 0007 as planned; it follows 0008_blob_reader, which was committed first and
depends on 0006_search_index, so that the graph stays one line.
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("blobviewer", "0008_blob_reader"),
    ]

    operations = [
        migrations.RemoveField(model_name="blob", name="line_index"),
    ]
