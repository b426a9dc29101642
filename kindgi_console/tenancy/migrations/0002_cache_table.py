"""The database cache's table (the shared cache when the broker is not Redis).

`createcachetable` is not a migration of its own; running it here means `migrate` is the
one step a deployment or `make run` needs. It does nothing for a cache that is not in the
database.
"""

from django.core.management import call_command
from django.db import migrations


def create_cache_table(apps: object, schema_editor: object) -> None:
    call_command("createcachetable", verbosity=0)


class Migration(migrations.Migration):
    dependencies = [("tenancy", "0001_initial")]

    operations = [migrations.RunPython(create_cache_table, migrations.RunPython.noop)]
