"""A blob that a rebuild re-derived into another names it (`Blob.replaced_by`), so that
links to it, share links included, lead to the new blob."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('blobviewer', '0013_folded_only_where_needed'),
    ]

    operations = [
        migrations.AddField(
            model_name='blob',
            name='replaced_by',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='replaces', to='blobviewer.blob'),
        ),
    ]
