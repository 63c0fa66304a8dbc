from django.urls import include, path

urlpatterns = [path("metrics/", include("boson_django.metrics.urls"))]
