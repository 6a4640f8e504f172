"""A tool result's title where its importer knows it (a Codex poll: `npm test · poll 2`)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('blobviewer', '0014_blob_replaced_by'),
    ]

    operations = [
        migrations.AddField(
            model_name='item',
            name='title',
            field=models.CharField(blank=True, max_length=200),
        ),
    ]
