"""Two indexes fewer, both served by a unique constraint that starts with the same column:
Item.session by item_unique_seq (session, seq) and BlobRef.item by blobref_unique_item_blob
(item, blob). Ingest writes every item and reference through them, so each index fewer is
work saved on every row it writes."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("blobviewer", "0007_drop_blob_line_index"),
    ]

    operations = [
        migrations.AlterField(
            model_name="blobref",
            name="item",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="blob_refs",
                to="blobviewer.item",
            ),
        ),
        migrations.AlterField(
            model_name="item",
            name="session",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="items",
                to="blobviewer.session",
            ),
        ),
    ]
