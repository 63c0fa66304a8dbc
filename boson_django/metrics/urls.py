"""``path("metrics/", include("boson_django.metrics.urls"))``."""

from django.urls import path

from boson_django.metrics.views import metrics

app_name = "boson_metrics"
urlpatterns = [path("", metrics, name="metrics")]
