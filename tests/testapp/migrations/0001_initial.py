from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True
    dependencies: list = []

    operations = [
        migrations.CreateModel(
            name="StartMark",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("job_id", models.CharField(db_index=True, max_length=64)),
                ("fence", models.BigIntegerField()),
                ("pid", models.IntegerField()),
                ("at", models.DateTimeField()),
            ],
        ),
        migrations.CreateModel(
            name="Effect",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("job_id", models.CharField(db_index=True, max_length=64)),
                ("fence", models.BigIntegerField()),
                ("at", models.DateTimeField()),
            ],
        ),
    ]
