from django.urls import path

from bench.bare.views import store

urlpatterns = [path("api/v1/evaluate", store)]
